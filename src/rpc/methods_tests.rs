#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Methods, Role};
use crate::config::{Config, ProviderKind};
use crate::gateway::Gateway;
use crate::rpc::protocol::{FORBIDDEN, INVALID_PARAMS, METHOD_NOT_FOUND, NOT_ACCEPTED};
use crate::rpc::runs::RunTracker;

/// A gateway on the echo provider with no channels but `rpc`, and its methods.
async fn methods(dir: &std::path::Path) -> (Gateway, Methods) {
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = dir.join("data");
    config.agent.workspace = dir.join("ws");
    config.terminal.user = "tester".into();
    let gateway = Gateway::start(config, Vec::new()).await.unwrap();
    let api = gateway.api();
    let runs = RunTracker::spawn(api.rpc_channel().subscribe(), CancellationToken::new());
    let methods = Methods { api, runs };
    (gateway, methods)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_runs_in_the_default_session_and_wait_returns_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, m) = methods(dir.path()).await;
    let accepted = m.call("agent", &json!({"message": "hi"})).await.unwrap();
    assert_eq!(accepted["session"], "agent:main:terminal:direct:tester");
    let run_id = accepted["runId"].as_str().unwrap();
    let done = m
        .call("agent.wait", &json!({"runId": run_id, "timeoutMs": 20_000}))
        .await
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    assert_eq!(done["text"], "echo: hi");
    let sessions = m.call("sessions.list", &Value::Null).await.unwrap();
    assert_eq!(
        sessions["sessions"][0]["key"],
        "agent:main:terminal:direct:tester"
    );
    let status = m.call("status", &json!({})).await.unwrap();
    assert_eq!(status["live"], true);
    assert!(
        status["channels"]
            .as_array()
            .unwrap()
            .contains(&json!("rpc"))
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_get_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, m) = methods(dir.path()).await;
    let code = |r: Result<Value, super::Fault>| r.unwrap_err().code;
    assert_eq!(code(m.call("nope", &Value::Null).await), METHOD_NOT_FOUND);
    assert_eq!(code(m.call("agent", &json!({})).await), INVALID_PARAMS);
    assert_eq!(
        code(m.call("agent", &json!({"message": "  "})).await),
        INVALID_PARAMS
    );
    assert_eq!(
        code(m.call("agent", &json!({"message": "x", "extra": 1})).await),
        INVALID_PARAMS
    );
    assert_eq!(
        code(
            m.call("agent", &json!({"message": "x", "session": "bad key"}))
                .await
        ),
        INVALID_PARAMS
    );
    assert_eq!(
        code(m.call("status", &json!({"x": 1})).await),
        INVALID_PARAMS
    );
    // Coding-agent commands need an owner; the RPC is not one.
    assert_eq!(
        code(m.call("agent", &json!({"message": "/acp status"})).await),
        NOT_ACCEPTED
    );
    let stopped = m.call("abort", &json!({})).await.unwrap();
    assert_eq!(stopped["stoppedRun"], false);
    // A run id no message was given: refused, not waited on for the whole timeout.
    let unknown = m
        .call(
            "agent.wait",
            &json!({"runId": "run-987654321", "timeoutMs": 600_000}),
        )
        .await;
    assert_eq!(code(unknown), INVALID_PARAMS);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_token_may_not_pair_or_end_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, m) = methods(dir.path()).await;
    let code = |r: Result<Value, super::Fault>| r.unwrap_err().code;
    let pairing = json!({"channel": "telegram", "code": "ABCD1234"});
    for method in ["pairing.approve", "pairing.reject"] {
        let refused = m.call_as(Role::Client, method, &pairing).await;
        assert_eq!(code(refused), FORBIDDEN, "{method}");
    }
    for text in ["/reset", "/new hello"] {
        let refused = m
            .call_as(Role::Client, "agent", &json!({"message": text}))
            .await;
        assert_eq!(code(refused), FORBIDDEN, "{text}");
    }
    // The operator may; the rest stays open to clients.
    let approved = m
        .call_as(Role::Operator, "pairing.approve", &pairing)
        .await
        .unwrap();
    assert_eq!(approved["request"], Value::Null);
    m.call_as(Role::Client, "pairing.list", &json!({}))
        .await
        .unwrap();
    m.call_as(Role::Client, "status", &json!({})).await.unwrap();
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_adds_lists_runs_and_removes_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, m) = methods(dir.path()).await;
    let add = json!({"message": "stretch", "every": "1h", "id": "j1"});
    let added = m.call("cron.add", &add).await.unwrap();
    assert_eq!(
        added["job"]["session_key"],
        "agent:main:terminal:direct:tester"
    );
    assert_eq!(added["job"]["origin"], "operator");
    assert_eq!(added["answersKnown"], false);
    // Any session may be named.
    let other = json!({"message": "m", "at": "in 1h", "id": "j2", "session": "agent:main:telegram:direct:42", "missed": "skip"});
    let added = m.call("cron.add", &other).await.unwrap();
    assert_eq!(added["job"]["session_key"], "agent:main:telegram:direct:42");
    let listed = m.call("cron.list", &json!({})).await.unwrap();
    let ids: Vec<&str> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["j1", "j2"]);
    assert!(listed["jobs"][0]["next_ms"].as_u64().is_some());
    // Once the session has answered somewhere, run-now queues its turn there.
    let hi = m.call("agent", &json!({"message": "hi"})).await.unwrap();
    let wait = |run_id: &str| json!({"runId": run_id, "timeoutMs": 20_000});
    m.call("agent.wait", &wait(hi["runId"].as_str().unwrap()))
        .await
        .unwrap();
    let ran = m.call("cron.run", &json!({"id": "j1"})).await.unwrap();
    let done = m
        .call("agent.wait", &wait(ran["runId"].as_str().unwrap()))
        .await
        .unwrap();
    assert_eq!(done["text"], "echo: [Scheduled job j1] stretch", "{done}");
    let removed = m.call("cron.remove", &json!({"id": "j1"})).await.unwrap();
    assert_eq!(removed["job"]["id"], "j1");
    let listed = m.call("cron.list", &Value::Null).await.unwrap();
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_changes_need_the_operator_and_config_jobs_stay_in_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, m) = methods(dir.path()).await;
    let fault = |r: Result<Value, super::Fault>| r.unwrap_err();
    let add = json!({"message": "stretch", "every": "1h", "id": "j1"});
    for (method, params) in [
        ("cron.add", add.clone()),
        ("cron.remove", json!({"id": "j1"})),
        ("cron.run", json!({"id": "j1"})),
    ] {
        let refused = fault(m.call_as(Role::Client, method, &params).await);
        assert_eq!(refused.code, FORBIDDEN, "{method}");
    }
    m.call_as(Role::Client, "cron.list", &json!({}))
        .await
        .unwrap();
    // A job the config keeps.
    let mut job = crate::rpc::cron_operator::new_job(
        m.api.config(),
        crate::agent::tools::cron::CronSpec {
            message: "weekly".into(),
            cron: Some("30 14 * * 3".into()),
            ..Default::default()
        },
        crate::domain::message::now_ms(),
    )
    .unwrap();
    job.id = "weekly".into();
    job.origin = crate::store::CronOrigin::Config;
    m.api.store().put_cron(&job).await.unwrap();
    for method in ["cron.remove", "cron.run"] {
        let refused = fault(m.call(method, &json!({"id": "weekly"})).await);
        assert_eq!(refused.code, INVALID_PARAMS, "{method}");
        assert!(
            refused.message.contains("kept in the config"),
            "{refused:?}"
        );
    }
    // The gateway's rules check what is added.
    for bad in [
        json!({"message": "x", "cron": "61 * * * *"}),
        json!({"message": "x", "every": "1h", "at": "in 5m"}),
        json!({"message": "x", "every": "1h", "missed": "later"}),
        json!({"message": "x", "every": "1h", "session": "not a key"}),
        json!({"message": "x", "every": "1h", "color": "red"}),
        json!({"message": " ", "every": "1h"}),
    ] {
        assert_eq!(
            fault(m.call("cron.add", &bad).await).code,
            INVALID_PARAMS,
            "{bad}"
        );
    }
    let gone = fault(m.call("cron.remove", &json!({"id": "nope"})).await);
    assert!(gone.message.contains("no job `nope`"), "{gone:?}");
    gateway.shutdown().await;
}
