#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use chela_channel::{ChatKind, Conversation};
use proptest::prelude::*;

use super::*;

fn conv(channel: &str, kind: ChatKind, chat: &str, thread: Option<&str>) -> Conversation {
    Conversation {
        channel: channel.to_owned(),
        account: "default".to_owned(),
        kind,
        chat_id: chat.to_owned(),
        thread_id: thread.map(str::to_owned),
    }
}

fn key(agent: &str, conversation: &Conversation, sender: &str, scope: DmScope) -> String {
    build(agent, conversation, sender, scope, &BTreeMap::new()).to_string()
}

#[test]
fn direct_messages_follow_dm_scope() {
    let dm = conv("telegram", ChatKind::Direct, "42", None);
    assert_eq!(key("main", &dm, "42", DmScope::Main), "agent:main:main");
    assert_eq!(
        key("main", &dm, "42", DmScope::PerPeer),
        "agent:main:direct:42"
    );
    assert_eq!(
        key("main", &dm, "42", DmScope::PerChannelPeer),
        "agent:main:telegram:direct:42"
    );
    let mut work = dm.clone();
    work.account = "Work".to_owned();
    assert_eq!(
        key("main", &work, "42", DmScope::PerAccountChannelPeer),
        "agent:main:telegram:work:direct:42"
    );
}

#[test]
fn groups_rooms_topics_and_threads() {
    let scope = DmScope::default();
    let group = conv("telegram", ChatKind::Group, "-100123", None);
    assert_eq!(
        key("main", &group, "7", scope),
        "agent:main:telegram:group:-100123"
    );
    let topic = conv("telegram", ChatKind::Group, "-100123", Some("5"));
    assert_eq!(
        key("main", &topic, "7", scope),
        "agent:main:telegram:group:-100123:topic:5"
    );
    let room = conv("discord", ChatKind::Channel, "111", None);
    assert_eq!(
        key("ops", &room, "7", scope),
        "agent:ops:discord:channel:111"
    );
    let thread = conv("discord", ChatKind::Channel, "111", Some("222"));
    assert_eq!(
        key("ops", &thread, "7", scope),
        "agent:ops:discord:channel:111:thread:222"
    );
    let dm_thread = conv("telegram", ChatKind::Direct, "42", Some("9"));
    assert_eq!(
        key("main", &dm_thread, "42", scope),
        "agent:main:telegram:direct:42:thread:9"
    );
}

#[test]
fn builder_lowercases_normalizes_and_escapes() {
    let dm = conv("Terminal", ChatKind::Direct, "x", None);
    assert_eq!(
        key("My Agent!", &dm, "Alice:Smith", DmScope::PerChannelPeer),
        "agent:my-agent:terminal:direct:alice%3asmith"
    );
    assert_eq!(key("", &dm, "", DmScope::PerPeer), "agent:main:direct:x");
}

#[test]
fn identity_links_map_to_the_canonical_peer() {
    let links = BTreeMap::from([(
        "Ana".to_owned(),
        vec!["telegram:42".to_owned(), "discord:999".to_owned()],
    )]);
    let tg = conv("telegram", ChatKind::Direct, "42", None);
    let dc = conv("discord", ChatKind::Direct, "dm1", None);
    let a = build("main", &tg, "42", DmScope::PerPeer, &links).to_string();
    let b = build("main", &dc, "999", DmScope::PerPeer, &links).to_string();
    assert_eq!(a, "agent:main:direct:ana");
    assert_eq!(a, b);
    let other = build("main", &tg, "43", DmScope::PerPeer, &links).to_string();
    assert_eq!(other, "agent:main:direct:43");
}

#[test]
fn agent_id_normalization() {
    assert_eq!(normalize_agent_id(""), "main");
    assert_eq!(normalize_agent_id("  "), "main");
    assert_eq!(normalize_agent_id("Main"), "main");
    assert_eq!(normalize_agent_id("my agent"), "my-agent");
    assert_eq!(normalize_agent_id("__x__"), "x__");
    assert_eq!(normalize_agent_id("---"), "main");
    assert_eq!(normalize_agent_id(&"a".repeat(100)).len(), 64);
    assert!(is_valid_agent_id("a_b-c9"));
    assert!(!is_valid_agent_id("-a"));
    assert!(!is_valid_agent_id(""));
    assert!(!is_valid_agent_id(&"a".repeat(65)));
}

#[test]
fn parse_examples_from_the_spec() {
    let k = SessionKey::parse("agent:main:telegram:group:-100123:topic:5").unwrap();
    assert_eq!(
        k.base,
        KeyBase::Topic {
            channel: "telegram".into(),
            chat: "-100123".into(),
            topic: "5".into()
        }
    );
    let k = SessionKey::parse("agent:main:discord:channel:1:thread:2").unwrap();
    assert_eq!(k.thread.as_deref(), Some("2"));
    assert_eq!(k.parent().to_string(), "agent:main:discord:channel:1");
    let k = SessionKey::parse("AGENT:Main:ACP:0b6e").unwrap();
    assert_eq!(k.to_string(), "agent:main:acp:0b6e");
    let k = SessionKey::parse("agent:main:subagent:abc").unwrap();
    assert_eq!(k.base, KeyBase::Subagent { id: "abc".into() });
    let k = SessionKey::parse("agent:main:cron:daily-report").unwrap();
    assert_eq!(
        k.base,
        KeyBase::Cron {
            id: "daily-report".into()
        }
    );
    assert_eq!(k.to_string(), "agent:main:cron:daily-report");
}

#[test]
fn components_named_like_keywords_do_not_confuse_the_parser() {
    for text in [
        "agent:thread:main",
        "agent:main:thread:direct:thread",
        "agent:main:thread:group:thread:thread:thread",
        "agent:main:direct:thread:thread:thread",
        "agent:main:main:thread:x",
    ] {
        let k = SessionKey::parse(text).unwrap();
        assert_eq!(k.to_string(), text);
    }
    let k = SessionKey::parse("agent:main:direct:thread:thread:thread").unwrap();
    assert_eq!(
        k.base,
        KeyBase::Direct {
            peer: "thread".into()
        }
    );
    assert_eq!(k.thread.as_deref(), Some("thread"));
}

#[test]
fn parse_rejects_malformed_keys() {
    for text in [
        "",
        "agent",
        "agent:main",
        "session:main:main",
        "agent:-x:main",
        "agent:main:direct",
        "agent:main:direct:",
        "agent:main:direct:a:b",
        "agent:main:x:y:z:w:v:u",
        "agent:main:direct:%zz",
        "agent:main:direct:%61",
        "agent:main:direct:%ff",
        "agent:main:thread:1",
    ] {
        assert!(SessionKey::parse(text).is_err(), "{text:?} parsed");
    }
}

#[test]
fn storage_names_are_readable_and_reversible() {
    let k = SessionKey::parse("agent:main:telegram:direct:42").unwrap();
    assert_eq!(k.storage_name(), "agent.main.telegram.direct.42");
    assert_eq!(SessionKey::from_storage_name(&k.storage_name()).unwrap(), k);
    assert_eq!(storage_name(":"), "_3a");
    assert_eq!(storage_name("a_b.c%"), "a_5fb_2ec_25");
    assert!(from_storage_name(".x").is_err());
    assert!(from_storage_name("_61").is_err());
    assert!(from_storage_name("A").is_err());
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{1,12}",
        "-?[0-9]{1,15}",
        "thread|topic|group|direct|channel|main|acp|subagent|cron",
        "\\PC{1,10}",
        ".{1,10}",
    ]
}

fn agent() -> impl Strategy<Value = String> {
    "[a-z0-9][a-z0-9_-]{0,63}"
}

fn base() -> impl Strategy<Value = KeyBase> {
    let c = component;
    prop_oneof![
        Just(KeyBase::Main),
        c().prop_map(|peer| KeyBase::Direct { peer }),
        (c(), c()).prop_map(|(channel, peer)| KeyBase::ChannelDirect { channel, peer }),
        (c(), c(), c()).prop_map(|(channel, account, peer)| KeyBase::AccountDirect {
            channel,
            account,
            peer
        }),
        (c(), c()).prop_map(|(channel, chat)| KeyBase::Group { channel, chat }),
        (c(), c()).prop_map(|(channel, chat)| KeyBase::Room { channel, chat }),
        (c(), c(), c()).prop_map(|(channel, chat, topic)| KeyBase::Topic {
            channel,
            chat,
            topic
        }),
        c().prop_map(|id| KeyBase::Acp { id }),
        c().prop_map(|id| KeyBase::Subagent { id }),
        c().prop_map(|id| KeyBase::Cron { id }),
    ]
}

fn session_key() -> impl Strategy<Value = SessionKey> {
    (agent(), base(), proptest::option::of(component())).prop_map(|(agent, base, thread)| {
        SessionKey {
            agent,
            base,
            thread,
        }
    })
}

fn conversation() -> impl Strategy<Value = Conversation> {
    (
        prop_oneof![
            Just("telegram".to_owned()),
            Just("discord".to_owned()),
            ".{0,8}"
        ],
        ".{0,8}",
        prop_oneof![
            Just(ChatKind::Direct),
            Just(ChatKind::Group),
            Just(ChatKind::Channel)
        ],
        ".{0,12}",
        proptest::option::of(".{0,8}"),
    )
        .prop_map(
            |(channel, account, kind, chat_id, thread_id)| Conversation {
                channel,
                account,
                kind,
                chat_id,
                thread_id,
            },
        )
}

fn dm_scope() -> impl Strategy<Value = DmScope> {
    prop_oneof![
        Just(DmScope::Main),
        Just(DmScope::PerPeer),
        Just(DmScope::PerChannelPeer),
        Just(DmScope::PerAccountChannelPeer),
    ]
}

proptest! {
    #[test]
    fn parse_display_round_trips(k in session_key()) {
        let text = k.to_string();
        prop_assert_eq!(SessionKey::parse(&text).unwrap(), k);
        prop_assert!(!text.chars().any(|c| c.is_uppercase()));
    }

    #[test]
    fn storage_name_round_trips(k in session_key(), raw in "\\PC{0,40}") {
        let name = k.storage_name();
        prop_assert!(name.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-')));
        prop_assert_eq!(SessionKey::from_storage_name(&name).unwrap(), k);
        let raw_name = storage_name(&raw);
        prop_assert!(raw_name != "." && raw_name != "..");
        prop_assert_eq!(from_storage_name(&raw_name).unwrap(), raw);
    }

    #[test]
    fn built_keys_are_lowercase_and_parse(
        agent in ".{0,20}",
        conversation in conversation(),
        sender in ".{0,12}",
        scope in dm_scope(),
    ) {
        let k = build(&agent, &conversation, &sender, scope, &BTreeMap::new());
        let text = k.to_string();
        prop_assert_eq!(text.to_lowercase(), text.clone());
        prop_assert_eq!(SessionKey::parse(&text).unwrap(), k);
    }
}
