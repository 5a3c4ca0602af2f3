//! Making, listing, removing and running jobs: what the `cron` tool, the RPC (`chela cron`)
//! and the config's `[[cron]]` and `[heartbeat]` do through one set of rules.

use chela_channel::{ChatKind, Conversation};
use tokio::sync::Notify;

use super::{CronError, Fire, heartbeat, run_key, turn_of};
use crate::agent::tools::cron::CronSpec;
use crate::config::{Config, TargetConfig, is_valid_job_id};
use crate::domain::schedule::{Missed, Schedule};
use crate::domain::session_key::SessionKey;
use crate::store::{CronJob, CronOrigin, Store};

/// A job to make, as asked (checked by [`build`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// Its id; `None`: one is made.
    pub id: Option<String>,
    /// A five-field cron expression.
    pub cron: Option<String>,
    /// Its IANA zone.
    pub tz: Option<String>,
    /// A one-shot time (RFC 3339 or `in 20m`).
    pub at: Option<String>,
    /// An interval (`30m`).
    pub every: Option<String>,
    /// The turn's prompt.
    pub message: String,
    /// A run missed while down.
    pub missed: Missed,
    /// The session it belongs to (and runs in, unless `isolated`).
    pub session_key: String,
    /// It runs in a session of its own (`agent:<a>:cron:<id>`).
    pub isolated: bool,
    /// Where its answers go (`None`: where the session last replied).
    pub target: Option<Conversation>,
    /// Who makes it.
    pub origin: CronOrigin,
}

impl NewJob {
    /// The job `spec` asks for, in session `session_key`, answering in `target`, made by
    /// `origin`.
    pub fn from_spec(
        spec: CronSpec,
        session_key: String,
        target: Option<Conversation>,
        origin: CronOrigin,
    ) -> Result<NewJob, CronError> {
        Ok(NewJob {
            id: spec.id,
            cron: spec.cron,
            tz: spec.tz,
            at: spec.at,
            every: spec.every,
            message: spec.message,
            missed: missed_of(spec.missed.as_deref())?,
            session_key,
            isolated: spec.isolated,
            target,
            origin,
        })
    }
}

/// The shortest interval of a job the agent makes (a cron expression's is a minute anyway);
/// the operator and the config may go below it.
pub const MIN_EVERY_MS: u64 = 60_000;

/// The schedule of `cron`/`tz`, `at` or `every` (exactly one given), at `now_ms`.
pub fn schedule_of(
    cron: Option<&str>,
    tz: Option<&str>,
    at: Option<&str>,
    every: Option<&str>,
    now_ms: u64,
) -> Result<Schedule, CronError> {
    match (cron, at, every) {
        (Some(expr), None, None) => Ok(Schedule::cron(expr, tz)?),
        (None, Some(at), None) => Ok(Schedule::at(at, now_ms)?),
        (None, None, Some(every)) => Ok(Schedule::every(every, now_ms)?),
        _ => Err(CronError::Refused(
            "give exactly one of `cron`, `at`, `every`".into(),
        )),
    }
}

/// Checks `new` and makes its job, due at its first run after `now_ms`.
pub fn build(new: NewJob, now_ms: u64) -> Result<CronJob, CronError> {
    let id = match new.id {
        Some(id) if is_valid_job_id(&id) && id != heartbeat::HEARTBEAT_ID => id,
        Some(id) => {
            return Err(CronError::Refused(format!(
                "`{id}` is not a job id: 1 to 40 letters, digits, - and _"
            )));
        }
        None => format!("job-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
    };
    if new.message.trim().is_empty() {
        return Err(CronError::Refused("the job needs a message".into()));
    }
    let schedule = schedule_of(
        new.cron.as_deref(),
        new.tz.as_deref(),
        new.at.as_deref(),
        new.every.as_deref(),
        now_ms,
    )?;
    if let Schedule::Every { every_ms, .. } = schedule
        && every_ms < MIN_EVERY_MS
        && new.origin == CronOrigin::Agent
    {
        return Err(CronError::Refused(
            "an interval of at least a minute, please".into(),
        ));
    }
    if new.isolated && SessionKey::parse(&new.session_key).is_err() {
        return Err(CronError::Refused(format!(
            "an isolated job needs a valid session key, not {:?}",
            new.session_key
        )));
    }
    let next_ms = schedule.next_after(now_ms)?;
    if next_ms.is_none() {
        return Err(CronError::Refused("that time has passed".into()));
    }
    Ok(CronJob {
        id,
        schedule,
        session_key: new.session_key,
        isolated: new.isolated,
        target: new.target,
        message: new.message.trim().to_owned(),
        missed: new.missed,
        origin: new.origin,
        created_ms: now_ms,
        next_ms,
        last_ms: None,
        active_hours: None,
    })
}

/// The `missed` policy named `name` (`run_once`, the default, or `skip`).
pub fn missed_of(name: Option<&str>) -> Result<Missed, CronError> {
    match name {
        None | Some("run_once") => Ok(Missed::RunOnce),
        Some("skip") => Ok(Missed::Skip),
        Some(other) => Err(CronError::Refused(format!(
            "unknown `missed` value `{other}` (run_once or skip)"
        ))),
    }
}

/// Refuses to change or run `job` when the config keeps it (`[[cron]]`, `[heartbeat]`): it
/// is seeded again at every start, so only the config changes it.
pub fn changeable(job: &CronJob) -> Result<(), CronError> {
    match job.origin {
        CronOrigin::Config | CronOrigin::Heartbeat => Err(CronError::Refused(format!(
            "job `{}` is kept in the config ([[cron]] or [heartbeat]); change it there",
            job.id
        ))),
        CronOrigin::Operator | CronOrigin::Agent => Ok(()),
    }
}

/// Stores the new `job` (refused when its id is taken) and wakes the scheduler.
pub async fn add(store: &Store, wake: &Notify, job: CronJob) -> Result<CronJob, CronError> {
    if !store.add_cron(&job).await? {
        return Err(CronError::Refused(format!(
            "a job `{}` exists already",
            job.id
        )));
    }
    wake.notify_one();
    Ok(job)
}

/// Removes job `id` and wakes the scheduler.
pub async fn remove(store: &Store, wake: &Notify, id: &str) -> Result<CronJob, CronError> {
    let job = store
        .cron_job(id)?
        .ok_or_else(|| CronError::NotFound(id.to_owned()))?;
    store.remove_cron(id).await?;
    wake.notify_one();
    Ok(job)
}

/// Runs job `id` now (its schedule is unchanged); the queued turn's seq.
pub async fn run_now(store: &Store, fire: &dyn Fire, id: &str) -> Result<u64, CronError> {
    let job = store
        .cron_job(id)?
        .ok_or_else(|| CronError::NotFound(id.to_owned()))?;
    let to = match &job.target {
        Some(to) => to.clone(),
        None => store.target(&job.session_key)?.ok_or_else(|| {
            CronError::Refused("the job's session has no chat to answer in yet".into())
        })?,
    };
    let now = crate::domain::message::now_ms();
    let turn = turn_of(&job, to, now, now);
    let key = format!("{}|now", run_key(&job.id, now));
    fire.fire(&key, turn)
        .await?
        .ok_or_else(|| CronError::Queue("it was queued already".into()))
}

/// One line about `job` at `now_ms`: id, schedule, next run, session, message.
pub fn describe(job: &CronJob, now_ms: u64) -> String {
    use crate::domain::schedule::iso;
    let next = match job.next_ms {
        Some(next) if next > now_ms => format!(
            "next {} (in {})",
            iso(next),
            humantime::format_duration(std::time::Duration::from_secs(
                (next - now_ms).div_ceil(1000)
            ))
        ),
        Some(next) => format!("due since {}", iso(next)),
        None => "no next run".to_owned(),
    };
    let isolated = if job.isolated { " (isolated)" } else { "" };
    format!(
        "{}  {}  {next}  {}{isolated}  {:?}",
        job.id,
        job.schedule.describe(),
        job.session_key,
        crate::domain::text::excerpt(&job.message)
    )
}

/// The session key and conversation a config target names.
pub fn resolve_target(config: &Config, t: &TargetConfig) -> (String, Option<Conversation>) {
    if !t.session.trim().is_empty() {
        return (t.session.trim().to_owned(), None);
    }
    let account = match t.account.trim() {
        "" => "default",
        a => a,
    };
    let conversation = Conversation {
        channel: t.channel.trim().to_owned(),
        account: account.to_owned(),
        kind: if t.group {
            ChatKind::Group
        } else {
            ChatKind::Direct
        },
        chat_id: t.chat.trim().to_owned(),
        thread_id: None,
    };
    let key = crate::domain::session_key::build(
        config.agent_id_for(&conversation, &conversation.chat_id),
        &conversation,
        &conversation.chat_id,
        config.session.dm_scope,
        &config.session.identity_links,
    )
    .to_string();
    (key, Some(conversation))
}

/// The jobs the config asks for (`[[cron]]`, `[heartbeat]`), due after `now_ms`.
fn configured(config: &Config, now_ms: u64) -> Vec<CronJob> {
    let mut out = Vec::new();
    for entry in &config.cron {
        let Ok(schedule) = entry.schedule(now_ms) else {
            continue; // refused by the config check
        };
        let (session_key, target) = resolve_target(config, &entry.target());
        // `None`: a one-shot time that has passed (kept only while its stored job waits to
        // be handled by its `missed` policy).
        let Ok(next_ms) = schedule.next_after(now_ms) else {
            continue;
        };
        out.push(CronJob {
            id: entry.id.clone(),
            schedule,
            session_key,
            isolated: entry.isolated,
            target,
            message: entry.message.clone(),
            missed: entry.missed,
            origin: CronOrigin::Config,
            created_ms: now_ms,
            next_ms,
            last_ms: None,
            active_hours: None,
        });
    }
    let (key, target) = resolve_target(config, &config.heartbeat.target());
    out.extend(heartbeat::job(config, key, target, now_ms));
    out
}

/// Whether stored job `old` is still what the config asks for as `new` (then it keeps its
/// next run: a run missed while down is handled by its `missed` policy; an interval keeps
/// its rhythm).
fn unchanged(old: &CronJob, new: &CronJob) -> bool {
    let same_schedule = match (&old.schedule, &new.schedule) {
        (Schedule::Every { every_ms: a, .. }, Schedule::Every { every_ms: b, .. }) => a == b,
        (a, b) => a == b,
    };
    same_schedule
        && old.origin == new.origin
        && old.session_key == new.session_key
        && old.isolated == new.isolated
        && old.target == new.target
        && old.message == new.message
        && old.missed == new.missed
        && old.active_hours == new.active_hours
}

/// Brings the store's config jobs in line with `config` at `now_ms`: new or changed entries
/// are written, entries gone from the config are removed, unchanged ones keep their state.
pub async fn seed_from(store: &Store, config: &Config, now_ms: u64) -> Result<(), CronError> {
    let wanted = configured(config, now_ms);
    for old in store.cron_jobs()? {
        let from_config = matches!(old.origin, CronOrigin::Config | CronOrigin::Heartbeat);
        if from_config && !wanted.iter().any(|w| w.id == old.id) {
            store.remove_cron(&old.id).await?;
            tracing::info!(job = %old.id, "cron: job no longer in the config; removed");
        }
    }
    for job in wanted {
        match store.cron_job(&job.id)? {
            // A one-shot time that passed while the gateway was down keeps its stored job:
            // the scheduler runs or skips it by its `missed` policy.
            Some(old) if unchanged(&old, &job) => {}
            Some(old) if !matches!(old.origin, CronOrigin::Config | CronOrigin::Heartbeat) => {
                tracing::warn!(job = %job.id, "cron: a job made at run time has this config entry's id; the config entry is ignored");
            }
            Some(old) if job.next_ms.is_none() => {
                store.remove_cron(&old.id).await?;
                tracing::info!(job = %job.id, "cron: the config entry's time has passed; removed");
            }
            None if job.next_ms.is_none() => {
                tracing::info!(job = %job.id, "cron: the config entry's time has passed; nothing to schedule");
            }
            _ => store.put_cron(&job).await?,
        }
    }
    Ok(())
}
