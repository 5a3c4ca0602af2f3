//! `cron.list`, `cron.add`, `cron.remove`, `cron.run`: the operator's schedules (`chela
//! cron`). They go through the gateway's side of the agent's `cron` tool
//! ([`GatewayApi::cron`]), so a job is checked by one set of rules; the operator may name any
//! session, and act on any job but those the config keeps. Changes need the operator token.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::api::{CronReply, GatewayApi, session_or_default};
use super::protocol::{self, Fault, NoParams};
use crate::agent::tools::cron::{CronAction, CronSpec};

/// The cron methods (all but `cron.list` change jobs).
pub const METHODS: [&str; 4] = ["cron.list", "cron.add", "cron.remove", "cron.run"];

/// `cron.add`'s params (what `chela cron add` sends).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddParams {
    /// What the turn asks when it fires.
    pub message: String,
    /// A five-field cron expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The cron expression's IANA time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// A one-shot time: RFC 3339 or `in 20m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// An interval: `30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// Its id; absent: the gateway makes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The session it runs in; absent: the terminal user's (as `agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// `run_once` | `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<String>,
    /// Run in a session of the job's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub isolated: bool,
}

/// `cron.remove`'s and `cron.run`'s params.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdParams {
    id: String,
}

/// Runs cron method `method` through `api`; `None` when it is not one.
pub(super) async fn call(
    api: &dyn GatewayApi,
    method: &str,
    params: &Value,
) -> Option<Result<Value, Fault>> {
    let action = match cron_action(api, method, params) {
        Some(Ok(action)) => action,
        Some(Err(fault)) => return Some(Err(fault)),
        None => return None,
    };
    let reply = match api.cron(action).await {
        Ok(reply) => reply,
        Err(fault) => return Some(Err(fault)),
    };
    Some(Ok(answer(reply)))
}

/// The action `method` with `params` asks for (its session resolved).
fn cron_action(
    api: &dyn GatewayApi,
    method: &str,
    params: &Value,
) -> Option<Result<CronAction, Fault>> {
    let id = |params: &Value| protocol::params::<IdParams>(params).map(|p| p.id);
    Some(match method {
        "cron.list" => protocol::params::<NoParams>(params).map(|_| CronAction::List),
        "cron.remove" => id(params).map(CronAction::Remove),
        "cron.run" => id(params).map(CronAction::Run),
        "cron.add" => protocol::params::<AddParams>(params).and_then(|p| {
            let session = session_or_default(api, p.session)?;
            Ok(CronAction::Add(CronSpec {
                id: p.id,
                cron: p.cron,
                tz: p.tz,
                at: p.at,
                every: p.every,
                message: p.message,
                target: Some(session),
                missed: p.missed,
                isolated: p.isolated,
            }))
        }),
        _ => return None,
    })
}

/// The answer frame's result for `reply`.
fn answer(reply: CronReply) -> Value {
    match reply {
        CronReply::Jobs(jobs) => json!({ "jobs": jobs }),
        CronReply::Added { job, answers_known } => {
            json!({ "job": job, "answersKnown": answers_known })
        }
        CronReply::Removed(job) => json!({ "job": job }),
        CronReply::Queued { id, run_id } => json!({ "id": id, "runId": run_id }),
    }
}
