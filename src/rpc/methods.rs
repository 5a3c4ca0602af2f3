//! The methods: `agent`, `agent.wait`, `abort`, `sessions.list`, `status`, and those of
//! `super::pairing`, `super::cron`, `super::transcripts` and `super::session_send`
//! (`events.subscribe` belongs to the connection: see the server).

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{Inbound, Sender};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::GatewayApi;
use super::channel::RpcChannel;
use super::protocol::{self, FORBIDDEN, Fault, NOT_ACCEPTED, UNAVAILABLE};
use super::runs::RunTracker;
use crate::inbound::commands::Command;
use crate::inbound::route::{Accepted, RPC_CLIENT_SENDER, RPC_OPERATOR_SENDER};

/// How often `agent.wait` looks in the store when runs may go on other nodes.
const RECHECK_ELSEWHERE: Duration = Duration::from_millis(500);
/// `agent.wait`'s default wait.
pub const DEFAULT_WAIT_MS: u64 = 30_000;
/// The longest wait one `agent.wait` may ask for (a day).
const MAX_WAIT_MS: u64 = 24 * 3600 * 1000;

/// Who a connection is: its token decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The operator token (the discovery file's): every method.
    Operator,
    /// The client token (`rpc.token` or the made one): no method that changes who may talk to
    /// the bot or ends a session.
    Client,
}

/// Why `method` with `params` needs the operator, or `None` when any client may call it.
fn operator_only(method: &str, params: &Value) -> Option<&'static str> {
    match method {
        "pairing.approve" | "pairing.reject" => Some("pairing decides who may talk to the bot"),
        "cron.add" | "cron.remove" | "cron.run" => Some("a scheduled job may post into any chat"),
        "agent" => {
            let text = params.get("message").and_then(Value::as_str).unwrap_or("");
            // (`/approve`, `/acp` and `/session` are refused to the RPC's sender anyway.)
            match crate::inbound::commands::parse(text, None) {
                Some(Command::New(_) | Command::Reset { .. }) => Some("it ends the session"),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What the methods work on.
pub struct Methods {
    /// The gateway, through its narrow API.
    pub api: Arc<dyn GatewayApi>,
    /// Finished runs, for `agent.wait`.
    pub runs: Arc<RunTracker>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentParams {
    message: String,
    #[serde(default)]
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WaitParams {
    run_id: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AbortParams {
    #[serde(default)]
    session: Option<String>,
}

impl Methods {
    /// Runs method `method` with `params` for the operator.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value, Fault> {
        self.call_as(Role::Operator, method, params).await
    }

    /// Runs method `method` with `params` for a connection of `role`.
    pub async fn call_as(&self, role: Role, method: &str, params: &Value) -> Result<Value, Fault> {
        if role == Role::Client
            && let Some(why) = operator_only(method, params)
        {
            tracing::warn!(method, "rpc: refused without the operator token");
            return Err(Fault::new(
                FORBIDDEN,
                format!(
                    "{method} needs the operator token ({why}); run `chela` on the gateway's machine as its user, which reads it from the discovery file"
                ),
            ));
        }
        if self.api.shutdown().is_cancelled() {
            return Err(Fault::new(UNAVAILABLE, "the gateway is shutting down"));
        }
        match method {
            "agent" => self.agent(role, protocol::params(params)?).await,
            "agent.wait" => self.wait(protocol::params(params)?).await,
            "abort" => self.abort(protocol::params(params)?).await,
            "sessions.list" => {
                let protocol::NoParams {} = protocol::params(params)?;
                let sessions = self
                    .api
                    .store()
                    .list_sessions()
                    .map_err(|e| Fault::internal(e.to_string()))?;
                Ok(json!({ "sessions": sessions }))
            }
            "status" => {
                let protocol::NoParams {} = protocol::params(params)?;
                self.api.status().await
            }
            "sessions.send" => super::session_send::call(self.api.as_ref(), params).await,
            other if other.starts_with("cron.") => {
                match super::cron::call(self.api.as_ref(), other, params).await {
                    Some(result) => result,
                    None => Err(unknown(other)),
                }
            }
            other => match super::pairing::call(self.api.as_ref(), other, params)
                .await
                .or_else(|| super::transcripts::call(self.api.store(), other, params))
            {
                Some(result) => result,
                None => Err(unknown(other)),
            },
        }
    }

    /// The session key asked for, or the one `chela agent` uses.
    pub(super) fn session(&self, asked: Option<String>) -> Result<String, Fault> {
        super::api::session_or_default(self.api.as_ref(), asked)
    }

    /// `agent`: accepts the message durably (as `chela agent` does) and answers at once.
    /// The sender names the token's role: only the operator's run acts for an owner.
    async fn agent(&self, role: Role, params: AgentParams) -> Result<Value, Fault> {
        if params.message.trim().is_empty() {
            return Err(Fault::params("message is empty"));
        }
        let key = self.session(params.session)?;
        let call_id = uuid::Uuid::new_v4().simple().to_string();
        let accepted_ms = crate::domain::message::now_ms();
        let inbound = Inbound {
            conversation: RpcChannel::conversation(&call_id),
            sender: Sender {
                id: match role {
                    Role::Operator => RPC_OPERATOR_SENDER,
                    Role::Client => RPC_CLIENT_SENDER,
                }
                .into(),
                name: "rpc".into(),
                username: None,
            },
            message_id: call_id.clone(),
            text: params.message,
            reply_to: None,
            mentioned: true,
            timestamp_ms: accepted_ms,
            interaction: None,
            attachments: Vec::new(),
        };
        // Registered first: a command may answer before `accept_tracked` returns.
        let command_id = self.runs.expect_command(&call_id, accepted_ms);
        let accepted = self.api.submit(key.clone(), inbound).await;
        let run_id = match accepted {
            Ok(Accepted::Command) => command_id,
            Ok(Accepted::Queued(seq)) => {
                self.runs.forget_command(&call_id);
                crate::domain::run::run_id_for(&[seq])
            }
            Ok(Accepted::Ignored) => {
                self.runs.forget_command(&call_id);
                return Err(Fault::new(
                    NOT_ACCEPTED,
                    "not accepted: a command that needs an owner",
                ));
            }
            Err(e) => {
                self.runs.forget_command(&call_id);
                return Err(Fault::new(UNAVAILABLE, e.to_string()));
            }
        };
        tracing::info!(session = %key, run_id = %run_id, "rpc: message accepted");
        Ok(json!({ "runId": run_id, "acceptedAt": accepted_ms, "session": key }))
    }

    /// `agent.wait`: the run's result, or `timeout` (the run goes on).
    async fn wait(&self, params: WaitParams) -> Result<Value, Fault> {
        let ms = params
            .timeout_ms
            .unwrap_or(DEFAULT_WAIT_MS)
            .min(MAX_WAIT_MS);
        let shutdown = self.api.shutdown().clone();
        // Subscribed before the first look at the store, so no end is missed.
        let bus = self.api.live_events();
        let wait = self.runs.wait(
            &params.run_id,
            Duration::from_millis(ms),
            self.api.store(),
            bus,
            self.api.runs_elsewhere().then_some(RECHECK_ELSEWHERE),
        );
        tokio::select! {
            result = wait => result,
            _ = shutdown.cancelled() => Err(Fault::new(UNAVAILABLE, "the gateway is shutting down")),
        }
    }

    /// `abort`: `/stop` for a session: queued turns dropped, the run cancelled and settled,
    /// on the node that runs it. On a cluster the answer names that node (`node`); when it
    /// did not confirm in time, `stoppedRun` and `cleared` are null and `note` says so.
    async fn abort(&self, params: AbortParams) -> Result<Value, Fault> {
        let key = self.session(params.session)?;
        let aborted = self
            .api
            .abort(&key)
            .await
            .map_err(|e| Fault::new(UNAVAILABLE, e.to_string()))?;
        let mut answer = json!({
            "session": key,
            "stoppedRun": aborted.report.map(|r| r.stopped_run),
            "cleared": aborted.report.map(|r| r.cleared),
        });
        if self.api.runs_elsewhere() {
            answer["node"] = json!(aborted.node);
            let note = match (&aborted.node, aborted.report) {
                (Some(node), None) if aborted.not_handed.is_some() => Some(format!(
                    "the stop could not be handed to node {node}, which runs the session ({}): nothing was stopped",
                    aborted.not_handed.as_deref().unwrap_or_default()
                )),
                (Some(node), None) => Some(format!(
                    "the stop was handed to node {node}, which runs the session; it did not confirm in time"
                )),
                (None, None) if aborted.not_handed.is_some() => Some(format!(
                    "{}: nothing was stopped",
                    aborted.not_handed.as_deref().unwrap_or_default()
                )),
                (None, _) => Some("no node runs the session now".to_owned()),
                (Some(_), Some(_)) => None,
            };
            if let Some(note) = note {
                answer["note"] = json!(note);
            }
        }
        Ok(answer)
    }
}

/// The fault for unknown method `method`.
fn unknown(method: &str) -> Fault {
    Fault::new(
        protocol::METHOD_NOT_FOUND,
        format!(
            "unknown method {method:?}; expected agent, agent.wait, abort, sessions.list, status, sessions.show, sessions.export, pairing.list, pairing.approve, pairing.reject, {}, or events.subscribe",
            super::cron::METHODS.join(", ")
        ),
    )
}

#[cfg(test)]
#[path = "methods_tests.rs"]
mod tests;
