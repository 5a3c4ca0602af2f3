//! Who may run which command ([`route`]'s refusals), with a fake [`RouteFacts`].

use chela_channel::{BoxFuture, ChatKind, Conversation, Inbound, Sender};

use super::*;

/// The gateway's facts as a test sets them.
struct Facts {
    owner: &'static str,
    admin: &'static str,
    others_choose_models: bool,
}

impl RouteFacts for Facts {
    fn question_waiting(&self, _key: &str) -> bool {
        false
    }
    fn is_owner(&self, _channel: &str, sender_id: &str) -> bool {
        sender_id == self.owner
    }
    fn binding_owner(&self, _key: &str) -> Option<String> {
        None
    }
    fn command_allow_from(&self) -> &[String] {
        &[]
    }
    fn is_skill(&self, _key: &str, _name: &str) -> bool {
        false
    }
    fn others_choose_models(&self) -> bool {
        self.others_choose_models
    }
    fn is_group_admin<'a>(
        &'a self,
        _conv: &'a Conversation,
        sender_id: &'a str,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move { sender_id == self.admin })
    }
}

fn from(channel: &str, kind: ChatKind, sender: &str, text: &str) -> Inbound {
    Inbound {
        conversation: Conversation {
            channel: channel.into(),
            account: "default".into(),
            kind,
            chat_id: "-100".into(),
            thread_id: None,
        },
        sender: Sender {
            id: sender.into(),
            name: sender.into(),
            username: None,
        },
        message_id: "1".into(),
        text: text.into(),
        reply_to: None,
        mentioned: true,
        timestamp_ms: 0,
        interaction: None,
        attachments: Vec::new(),
    }
}

async fn routed(facts: &Facts, channel: &str, kind: ChatKind, sender: &str, text: &str) -> Route {
    route("k", &from(channel, kind, sender, text), facts).await
}

fn refused(why: Refusal) -> Route {
    Route::Refused { native: false, why }
}

#[tokio::test]
async fn only_owners_switch_models_unless_the_operator_opens_it() {
    // Issue #32.8: a non-owner could `/model <anything>` in a DM.
    let closed = Facts {
        owner: "1",
        admin: "3",
        others_choose_models: false,
    };
    let dm = ChatKind::Direct;
    let switch = Route::Command(Command::Model("big-model".into()));
    assert_eq!(
        routed(&closed, "telegram", dm, "2", "/model big-model").await,
        refused(Refusal::ModelOwnerOnly)
    );
    assert_eq!(
        routed(&closed, "telegram", dm, "1", "/model big-model").await,
        switch
    );
    assert_eq!(
        routed(&closed, "terminal", dm, "me", "/model big-model").await,
        switch
    );
    // Looking and going back to the operator's model stay open.
    for text in ["/model", "/model default", "/model reset"] {
        assert!(
            matches!(
                routed(&closed, "telegram", dm, "2", text).await,
                Route::Command(_)
            ),
            "{text}"
        );
    }
    // A group's admin is no owner either.
    assert_eq!(
        routed(
            &closed,
            "telegram",
            ChatKind::Group,
            "3",
            "/model big-model"
        )
        .await,
        refused(Refusal::ModelOwnerOnly)
    );
    let open = Facts {
        others_choose_models: true,
        ..closed
    };
    assert_eq!(
        routed(&open, "telegram", dm, "2", "/model big-model").await,
        switch
    );
    // In a group it still needs an owner or the group's admin.
    assert_eq!(
        routed(&open, "telegram", ChatKind::Group, "3", "/model big-model").await,
        switch
    );
    assert_eq!(
        routed(&open, "telegram", ChatKind::Group, "2", "/model big-model").await,
        refused(Refusal::AdminOnly)
    );
}

#[tokio::test]
async fn owner_only_commands_and_group_admin_commands() {
    let facts = Facts {
        owner: "1",
        admin: "3",
        others_choose_models: false,
    };
    for text in ["/acp spawn", "/session unbind", "/approve"] {
        assert_eq!(
            routed(&facts, "telegram", ChatKind::Direct, "2", text).await,
            refused(Refusal::OwnerOnly),
            "{text}"
        );
        assert!(matches!(
            routed(&facts, "telegram", ChatKind::Direct, "1", text).await,
            Route::Command(_)
        ));
    }
    for text in ["/new", "/reset", "/stop"] {
        let group = ChatKind::Group;
        assert_eq!(
            routed(&facts, "telegram", group, "2", text).await,
            refused(Refusal::AdminOnly),
            "{text}"
        );
        for allowed in ["1", "3"] {
            assert!(matches!(
                routed(&facts, "telegram", group, allowed, text).await,
                Route::Command(_)
            ));
        }
        assert!(matches!(
            routed(&facts, "telegram", ChatKind::Direct, "2", text).await,
            Route::Command(_)
        ));
    }
}
