//! Exec approvals (`tools.exec_approvals = "ask"`): before `exec` runs a command, the owner
//! approves it in the chat with `/approve <id> allow-once|allow-always|deny`. Commands
//! approved "always" are remembered in the store (exact command text, per agent). The asking
//! itself is the gateway's, behind [`Approver`], so the agent stays platform-blind.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::BoxFuture;
use crate::agent::tools::ToolOutput;
use crate::store::Store;

/// The owner's answer to one approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Run this command this once.
    AllowOnce,
    /// Run it, and this exact command from now on without asking.
    AllowAlways,
    /// Do not run it.
    Deny,
    /// Nobody answered in time.
    TimedOut,
    /// There is no conversation to ask in (a one-shot `chela agent` run, say).
    NoOneToAsk,
    /// The run was stopped while waiting.
    Cancelled,
}

impl Approval {
    /// Reads a decision as typed after `/approve <id>`.
    pub fn parse(word: &str) -> Option<Approval> {
        match word.trim().to_lowercase().as_str() {
            "allow-once" | "once" | "allow" | "yes" | "y" => Some(Approval::AllowOnce),
            "allow-always" | "always" => Some(Approval::AllowAlways),
            "deny" | "no" | "n" | "reject" => Some(Approval::Deny),
            _ => None,
        }
    }
}

/// Asks the owner to approve a command (the gateway implements it).
pub trait Approver: Send + Sync {
    /// Asks whether session `session_key`, whose run replies to `reply_to`, may run
    /// `command`; ends early on `cancel`.
    fn request(
        &self,
        session_key: &str,
        reply_to: Option<&chela_channel::Conversation>,
        command: &str,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Approval>;
}

/// The gateway's [`Approver`], given when the agent is built; `None` outside a gateway
/// (nobody can be asked).
pub type ApproverPort = Option<Arc<dyn Approver>>;

/// The settings-tree record holding the commands approved "always" for agent `agent`.
fn allowlist_key(kind: Asked, agent: &str) -> String {
    match kind {
        Asked::Exec => format!("exec-allowlist:{agent}"),
        Asked::McpCall => format!("mcp-allowlist:{agent}"),
    }
}

/// What kind of thing an approval is asked for; each has its own list of "always" answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// An `exec` command.
    Exec,
    /// A call of an MCP server's tool.
    McpCall,
}

/// What was approved "always" of `kind` for agent `agent`.
pub fn always_allowed(store: &Store, kind: Asked, agent: &str) -> Vec<String> {
    store
        .get_settings::<Vec<String>>(&allowlist_key(kind, agent))
        .ok()
        .flatten()
        .unwrap_or_default()
}

fn remember(store: &Store, kind: Asked, agent: &str, command: &str) {
    let mut list = always_allowed(store, kind, agent);
    if !list.iter().any(|c| c == command) {
        list.push(command.to_owned());
        if let Err(e) = store.put_settings(&allowlist_key(kind, agent), &list) {
            tracing::warn!(error = %e, "cannot remember an always-approved command");
        }
    }
}

/// What the owner approves of an `exec` call: the command, with the variables and the folder
/// the model asked for (they change what runs: `PATH`, `LD_PRELOAD`), so "always" covers
/// exactly that.
fn exec_summary(args: &Value) -> Option<String> {
    let mut summary = args.get("command").and_then(Value::as_str)?.to_owned();
    if let Some(env) = args.get("env").and_then(Value::as_object)
        && !env.is_empty()
    {
        let mut pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.sort();
        summary.push_str(&format!("  [env {}]", pairs.join(" ")));
    }
    if let Some(dir) = args.get("workdir").and_then(Value::as_str) {
        summary.push_str(&format!("  [in {dir}]"));
    }
    Some(summary)
}

/// Who asks for an approval, for which run, and of what kind.
pub struct Asking<'a> {
    /// What kind of thing is asked for.
    pub kind: Asked,
    /// The gateway's approver (`None`: nobody can be asked).
    pub approver: &'a ApproverPort,
    /// Where "always" answers are remembered.
    pub store: &'a Store,
    /// The agent whose list of "always" answers applies.
    pub agent: &'a str,
    /// The asking run's session.
    pub session_key: &'a str,
    /// The conversation the run replies to.
    pub reply_to: Option<&'a chela_channel::Conversation>,
    /// The run's stop.
    pub cancel: &'a CancellationToken,
}

/// Gets approval for an `exec` call's command: `Ok` when it may run, else the refusal the
/// model reads. Commands approved "always" before pass without asking.
pub async fn approve_exec(
    approver: &ApproverPort,
    store: &Store,
    agent: &str,
    session_key: &str,
    reply_to: Option<&chela_channel::Conversation>,
    args: &Value,
    cancel: &CancellationToken,
) -> Result<(), ToolOutput> {
    let Some(command) = exec_summary(args) else {
        // exec itself refuses a call without a command; nothing would run.
        return Ok(());
    };
    let asking = Asking {
        kind: Asked::Exec,
        approver,
        store,
        agent,
        session_key,
        reply_to,
        cancel,
    };
    approve(&asking, &command).await
}

/// Gets approval to run `what` (a command, or an MCP tool call with its arguments): `Ok`
/// when it may run, else the refusal the model reads. What was approved "always" before
/// passes without asking.
pub async fn approve(asking: &Asking<'_>, what: &str) -> Result<(), ToolOutput> {
    let (store, agent, kind) = (asking.store, asking.agent, asking.kind);
    if always_allowed(store, kind, agent).iter().any(|c| c == what) {
        return Ok(());
    }
    let answer = match asking.approver.as_ref() {
        Some(approver) => {
            let (key, to) = (asking.session_key, asking.reply_to);
            approver.request(key, to, what, asking.cancel.clone()).await
        }
        None => Approval::NoOneToAsk,
    };
    match answer {
        Approval::AllowOnce => Ok(()),
        Approval::AllowAlways => {
            remember(store, kind, agent, what);
            Ok(())
        }
        Approval::Deny => Err(ToolOutput::error("The owner denied running this command.")),
        Approval::TimedOut => Err(ToolOutput::error(
            "No approval in time: the command was not run.",
        )),
        Approval::NoOneToAsk => Err(ToolOutput::error(
            "This needs the owner's approval here, and there is no conversation to ask in: the command was not run.",
        )),
        Approval::Cancelled => Err(ToolOutput::error(
            "Cancelled while waiting for approval: the command was not run.",
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// Answers every request with the next of its scripted answers and records the commands.
    struct Scripted {
        answers: Mutex<Vec<Approval>>,
        asked: Mutex<Vec<String>>,
    }

    impl Approver for Scripted {
        fn request(
            &self,
            _: &str,
            _: Option<&chela_channel::Conversation>,
            command: &str,
            _: CancellationToken,
        ) -> BoxFuture<'static, Approval> {
            self.asked.lock().unwrap().push(command.to_owned());
            let answer = self.answers.lock().unwrap().remove(0);
            Box::pin(async move { answer })
        }
    }

    fn slot(answers: Vec<Approval>) -> (ApproverPort, Arc<Scripted>) {
        let scripted = Arc::new(Scripted {
            answers: Mutex::new(answers),
            asked: Mutex::new(Vec::new()),
        });
        let dyn_approver: Arc<dyn Approver> = scripted.clone();
        (Some(dyn_approver), scripted)
    }

    #[tokio::test]
    async fn an_mcp_call_allowed_always_is_not_an_exec_command_allowed() {
        let store = Store::temporary().unwrap();
        let (slot, scripted) = slot(vec![Approval::AllowAlways, Approval::Deny]);
        let cancel = CancellationToken::new();
        let asking = |kind| Asking {
            kind,
            approver: &slot,
            store: &store,
            agent: "main",
            session_key: "k",
            reply_to: None,
            cancel: &cancel,
        };
        let what = "kit__echo {}";
        approve(&asking(Asked::McpCall), what).await.unwrap();
        // Again: remembered, not asked.
        approve(&asking(Asked::McpCall), what).await.unwrap();
        // The same text as a command is asked for (and denied).
        assert!(approve(&asking(Asked::Exec), what).await.is_err());
        assert_eq!(scripted.asked.lock().unwrap().len(), 2);
        assert!(always_allowed(&store, Asked::Exec, "main").is_empty());
    }

    #[test]
    fn decisions_parse_loosely() {
        assert_eq!(Approval::parse("Allow-Once"), Some(Approval::AllowOnce));
        assert_eq!(Approval::parse("always"), Some(Approval::AllowAlways));
        assert_eq!(Approval::parse(" deny "), Some(Approval::Deny));
        assert_eq!(Approval::parse("maybe"), None);
    }

    #[tokio::test]
    async fn an_always_allowed_command_with_other_variables_is_asked_again() {
        let store = Store::temporary().unwrap();
        let (slot, scripted) = slot(vec![Approval::AllowAlways, Approval::Deny]);
        let cancel = CancellationToken::new();
        let ls = json!({"command": "ls"});
        approve_exec(&slot, &store, "main", "k", None, &ls, &cancel)
            .await
            .unwrap();
        let preloaded = json!({"command": "ls", "env": {"LD_PRELOAD": "./x.so"}});
        assert!(
            approve_exec(&slot, &store, "main", "k", None, &preloaded, &cancel)
                .await
                .is_err()
        );
        let asked = scripted.asked.lock().unwrap().clone();
        assert_eq!(asked, ["ls", "ls  [env LD_PRELOAD=\"./x.so\"]"]);
    }

    #[tokio::test]
    async fn allow_always_is_remembered_per_exact_command() {
        let store = Store::temporary().unwrap();
        let (slot, scripted) = slot(vec![Approval::AllowAlways, Approval::Deny]);
        let cancel = CancellationToken::new();
        let ls = json!({"command": "ls -la"});
        approve_exec(&slot, &store, "main", "k", None, &ls, &cancel)
            .await
            .unwrap();
        // Asked once: the second time the remembered command passes.
        approve_exec(&slot, &store, "main", "k", None, &ls, &cancel)
            .await
            .unwrap();
        assert_eq!(*scripted.asked.lock().unwrap(), ["ls -la"]);
        // Another command is asked for, and denied.
        let refusal = approve_exec(
            &slot,
            &store,
            "main",
            "k",
            None,
            &json!({"command": "ls"}),
            &cancel,
        )
        .await
        .unwrap_err();
        assert!(
            refusal.is_error && refusal.text.contains("denied"),
            "{refusal:?}"
        );
        // Another agent's list is its own.
        assert!(always_allowed(&store, Asked::Exec, "other").is_empty());
    }

    #[tokio::test]
    async fn no_approver_refuses() {
        let store = Store::temporary().unwrap();
        let refusal = approve_exec(
            &None,
            &store,
            "main",
            "k",
            None,
            &json!({"command": "true"}),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(
            refusal.text.contains("no conversation to ask"),
            "{refusal:?}"
        );
    }
}
