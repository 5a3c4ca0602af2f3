//! `chela cron list|add|rm|run`: the operator's scheduled jobs. Through the running gateway's
//! RPC (`cron.*`, operator token) when a gateway holds the store or in a cluster; on the
//! store itself otherwise (as `chela pairing`), except `run`, which needs the gateway's queue.
//! Exit codes: 0 done, 2 a bad argument (named), 1 anything else.

use std::process::ExitCode;

use chela::agent::tools::cron::CronSpec;
use chela::config::{Config, LoadedConfig, is_valid_job_id};
use chela::cron::{CronError, jobs};
use chela::domain::message::now_ms;
use chela::domain::session_key::SessionKey;
use chela::rpc::client::ClientError;
use chela::rpc::cron::AddParams;
use chela::rpc::cron_operator as operator;
use chela::store::{CronJob, CronOrigin, Store, StoreError};
use clap::{ArgGroup, Args, Subcommand};
use serde_json::{Value, json};

/// Scheduled-job actions.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum CronCommand {
    /// List every job (the config's too) with its next run.
    List {
        /// Print the jobs as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Schedule a turn: MESSAGE is asked in the session when the job fires.
    Add(AddArgs),
    /// Remove job ID (the config's jobs are changed in the config).
    Rm {
        /// The job's id.
        id: String,
    },
    /// Run job ID now (its schedule is unchanged; the gateway must run).
    Run {
        /// The job's id.
        id: String,
    },
}

/// `chela cron add`: a message and exactly one of `--cron`, `--at`, `--every`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(group(ArgGroup::new("when").required(true).args(["cron", "at", "every"])))]
pub struct AddArgs {
    /// What the turn asks when the job fires.
    #[arg(long, short)]
    pub message: String,
    /// A five-field cron expression (`min hour day month weekday`), e.g. "30 14 * * 3".
    #[arg(long)]
    pub cron: Option<String>,
    /// The cron expression's IANA time zone, e.g. Europe/Berlin (default: the host's zone).
    #[arg(long, conflicts_with_all = ["at", "every"])]
    pub tz: Option<String>,
    /// One run: an RFC 3339 time or "in 20m".
    #[arg(long)]
    pub at: Option<String>,
    /// A run every interval, e.g. 30m or 6h.
    #[arg(long)]
    pub every: Option<String>,
    /// The job's id (letters, digits, - and _; default: one is made).
    #[arg(long)]
    pub id: Option<String>,
    /// The session it runs in (default: this terminal user's DM session, as `chela agent`);
    /// its answers go where that session last replied.
    #[arg(long)]
    pub session: Option<String>,
    /// A run missed while the gateway was down: run it once at the start, or skip it.
    #[arg(long, value_parser = ["run_once", "skip"])]
    pub missed: Option<String>,
    /// Run in a session of the job's own (`agent:<a>:cron:<id>`, no chat history); its
    /// answers still go where --session last replied.
    #[arg(long)]
    pub isolated: bool,
}

/// A bad argument (exit 2): the flag and why.
#[derive(Debug, PartialEq, Eq)]
pub struct BadArg {
    /// The flag, e.g. `--cron`.
    pub flag: &'static str,
    /// Why it is refused.
    pub reason: String,
}

impl AddArgs {
    /// Checks the arguments as the gateway will (schedule, zone, id, session), so a mistake
    /// names its flag before anything is sent.
    pub fn check(&self, now_ms: u64) -> Result<(), BadArg> {
        let bad = |flag, reason: String| Err(BadArg { flag, reason });
        if self.message.trim().is_empty() {
            return bad("--message", "is empty".into());
        }
        if let Some(id) = &self.id
            && (!is_valid_job_id(id) || id == chela::cron::HEARTBEAT_ID)
        {
            return bad("--id", format!("{id:?}: 1 to 40 letters, digits, - and _"));
        }
        if let Some(key) = &self.session
            && let Err(e) = SessionKey::parse(key)
        {
            return bad("--session", format!("{key:?}: {e}"));
        }
        let when = jobs::schedule_of(
            self.cron.as_deref(),
            self.tz.as_deref(),
            self.at.as_deref(),
            self.every.as_deref(),
            now_ms,
        )
        .and_then(|s| {
            s.next_after(now_ms)?
                .map(|_| ())
                .ok_or_else(|| CronError::Refused("that time has passed".into()))
        });
        match when {
            Ok(()) => Ok(()),
            Err(e) => {
                let flag = match (&self.cron, &self.at) {
                    (Some(_), _) if self.tz.is_some() => "--cron/--tz",
                    (Some(_), _) => "--cron",
                    (None, Some(_)) => "--at",
                    (None, None) => "--every",
                };
                bad(flag, e.to_string())
            }
        }
    }

    /// The job as the gateway's rules take it.
    fn spec(&self) -> CronSpec {
        CronSpec {
            id: self.id.clone(),
            cron: self.cron.clone(),
            tz: self.tz.clone(),
            at: self.at.clone(),
            every: self.every.clone(),
            message: self.message.clone(),
            target: self.session.clone(),
            missed: self.missed.clone(),
            isolated: self.isolated,
        }
    }

    /// `cron.add`'s params.
    fn params(&self) -> AddParams {
        AddParams {
            message: self.message.clone(),
            cron: self.cron.clone(),
            tz: self.tz.clone(),
            at: self.at.clone(),
            every: self.every.clone(),
            id: self.id.clone(),
            session: self.session.clone(),
            missed: self.missed.clone(),
            isolated: self.isolated,
        }
    }
}

/// What an action did, from the store or the RPC.
enum Outcome {
    Jobs(Vec<CronJob>),
    Added(CronJob, bool),
    Removed(CronJob),
    Queued(String, String),
}

/// Runs a cron action.
pub async fn run(loaded: LoadedConfig, command: CronCommand) -> ExitCode {
    if let CronCommand::Add(args) = &command
        && let Err(bad) = args.check(now_ms())
    {
        eprintln!("chela: {}: {}", bad.flag, bad.reason);
        return ExitCode::from(2);
    }
    // A cluster's store is shared: the local gateway is asked, so its scheduler learns of
    // the change at once.
    let outcome = if loaded.config.cluster.enabled {
        through_rpc(&loaded, &command).await
    } else {
        match Store::open_config(&loaded.config) {
            Ok(store) => direct(&store, &loaded.config, &command).await,
            Err(StoreError::Locked { .. }) => through_rpc(&loaded, &command).await,
            Err(e) => Err(e.to_string()),
        }
    };
    match outcome {
        Ok(outcome) => {
            print(outcome, &command);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}

/// On the store, no gateway running.
async fn direct(store: &Store, config: &Config, command: &CronCommand) -> Result<Outcome, String> {
    // No scheduler runs to be woken: the gateway reads the jobs at its start.
    let wake = tokio::sync::Notify::new();
    let text = |e: CronError| e.to_string();
    Ok(match command {
        CronCommand::List { .. } => Outcome::Jobs(store.cron_jobs().map_err(|e| e.to_string())?),
        CronCommand::Add(args) => {
            let (job, known) = operator::add(store, config, &wake, args.spec())
                .await
                .map_err(text)?;
            Outcome::Added(job, known)
        }
        CronCommand::Rm { id } => {
            Outcome::Removed(operator::remove(store, &wake, id).await.map_err(text)?)
        }
        CronCommand::Run { id } => {
            operator::changeable(store, id).map_err(text)?;
            return Err(format!(
                "no gateway is running: `chela cron run {id}` queues the job's turn in a running gateway; start `chela gateway` first (the job runs on its schedule once it does)"
            ));
        }
    })
}

/// Through the running gateway's RPC, as its operator.
async fn through_rpc(loaded: &LoadedConfig, command: &CronCommand) -> Result<Outcome, String> {
    let call = async {
        let mut client = super::rpc::connect(loaded).await?;
        let (method, params) = match command {
            CronCommand::List { .. } => ("cron.list", json!({})),
            CronCommand::Add(args) => (
                "cron.add",
                serde_json::to_value(args.params())
                    .map_err(|e| ClientError::Protocol(e.to_string()))?,
            ),
            CronCommand::Rm { id } => ("cron.remove", json!({ "id": id })),
            CronCommand::Run { id } => ("cron.run", json!({ "id": id })),
        };
        client.call(method, params).await
    };
    let value = call.await.map_err(|e| e.to_string())?;
    decode(command, &value).map_err(|e| format!("unexpected answer from the gateway: {e}"))
}

/// The RPC's answer to `command`.
fn decode(command: &CronCommand, value: &Value) -> Result<Outcome, serde_json::Error> {
    let field = |name: &str| value.get(name).cloned().unwrap_or(Value::Null);
    let text = |name: &str| field(name).as_str().unwrap_or_default().to_owned();
    Ok(match command {
        CronCommand::List { .. } => Outcome::Jobs(serde_json::from_value(field("jobs"))?),
        CronCommand::Add(_) => Outcome::Added(
            serde_json::from_value(field("job"))?,
            field("answersKnown").as_bool().unwrap_or(true),
        ),
        CronCommand::Rm { .. } => Outcome::Removed(serde_json::from_value(field("job"))?),
        CronCommand::Run { .. } => Outcome::Queued(text("id"), text("runId")),
    })
}

/// Prints what `command` did.
fn print(outcome: Outcome, command: &CronCommand) {
    let now = now_ms();
    match outcome {
        Outcome::Jobs(jobs) if matches!(command, CronCommand::List { json: true }) => {
            println!("{}", json!({ "jobs": jobs }));
        }
        Outcome::Jobs(jobs) if jobs.is_empty() => println!("no scheduled jobs"),
        Outcome::Jobs(jobs) => {
            for job in jobs {
                println!("{}  ({})", jobs::describe(&job, now), origin(job.origin));
            }
        }
        Outcome::Added(job, known) => {
            println!("scheduled: {}", jobs::describe(&job, now));
            if !known {
                eprintln!(
                    "chela: note: session {} has not answered in any chat yet; its runs are skipped until it has (send it a message first)",
                    job.session_key
                );
            }
        }
        Outcome::Removed(job) => println!("removed job {}", job.id),
        Outcome::Queued(id, run_id) => println!("job {id} queued to run now ({run_id})"),
    }
}

/// Who made a job, as listed.
fn origin(origin: CronOrigin) -> &'static str {
    match origin {
        CronOrigin::Config => "config",
        CronOrigin::Operator => "operator",
        CronOrigin::Agent => "agent",
        CronOrigin::Heartbeat => "heartbeat",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "cron_tests.rs"]
mod tests;
