//! The commands stage: the command fast path (SPEC 2), answered before the queue, even while
//! a run is active. A command sees the gateway only through its port, [`CommandContext`]
//! (`port.rs`); `acp.rs` holds `/acp` and `/session`.

pub mod acp;
mod port;
mod tts;

pub use port::{CommandContext, Compactor};

use std::time::Duration;

use chela_channel::Inbound;

use crate::cluster::Stopped;
use crate::config::{DropPolicy, QueueLimits, QueueMode};
use crate::inbound::commands::{Command, HELP, excerpt};
use crate::lane::LaneSettings;

/// Handles one command from `inbound` for session `key` and answers in its conversation.
/// Returns a message to run next (the text after `/new`).
pub async fn handle(
    ctx: &dyn CommandContext,
    key: &str,
    inbound: &Inbound,
    command: Command,
) -> Option<Inbound> {
    let to = &inbound.conversation;
    let answer = match command {
        Command::Stop => stop_answer(ctx.stop(key).await),
        Command::New(first) => {
            let answer = reset(ctx, key, "new").await;
            ctx.answer(inbound, &answer).await;
            return first.map(|text| {
                let mut first_turn = inbound.clone();
                first_turn.text = text;
                first_turn.message_id = format!("{}#new", inbound.message_id);
                first_turn.interaction = None;
                first_turn
            });
        }
        Command::Reset { soft: true } => {
            let _ = ctx.lanes().stop(key).await;
            let _ = ctx.lanes().set_settings(key, None).await;
            if let Err(e) = crate::agent::model_choice::choose(ctx.store(), key, None)
                .and_then(|()| crate::agent::model_choice::set_thinking(ctx.store(), key, None))
                .and_then(|()| crate::agent::model_choice::show_reasoning(ctx.store(), key, None))
                .and_then(|()| crate::delivery::tts_choice::choose(ctx.store(), key, None))
            {
                tracing::warn!(error = %e, session = %key, "cannot reset the session's model");
            }
            "Session state reset; the conversation is kept.".to_string()
        }
        Command::Reset { soft: false } => reset(ctx, key, "reset").await,
        Command::Status => status(ctx, key).await,
        Command::Usage => usage(ctx, key).await,
        Command::Queue(args) if args.trim().is_empty() => {
            let text = queue(ctx, key, "").await;
            ctx.offer(inbound, &text, &queue_choices()).await;
            return None;
        }
        Command::Queue(args) => queue(ctx, key, &args).await,
        Command::Help => HELP
            .iter()
            .map(|(name, text)| format!("/{name} — {text}"))
            .collect::<Vec<_>>()
            .join("\n"),
        Command::Acp(args) => {
            let (answer, next) = acp::acp(ctx, key, inbound, &args).await;
            ctx.answer(inbound, &answer).await;
            return next;
        }
        Command::Session(args) => acp::session(ctx, key, &args).await,
        Command::Compact => compact(ctx, key).await,
        Command::Approve(args) => ctx.approve(to, &args).await,
        Command::Model(args) if args.trim().is_empty() => {
            let text = model(ctx, key, "").await;
            let choices = model_choices(ctx, key, inbound).await;
            ctx.offer(inbound, &text, &choices).await;
            return None;
        }
        Command::Model(args) => model(ctx, key, &args).await,
        Command::Think(args) => think(ctx, key, &args),
        Command::Reasoning(args) => reasoning(ctx, key, &args),
        Command::Tts(args) => tts::tts(ctx, key, &args),
        Command::Whoami => format!(
            "You are {} (id {}) on {}; session {}",
            if inbound.sender.name.is_empty() {
                "?"
            } else {
                &inbound.sender.name
            },
            inbound.sender.id,
            to.channel,
            key
        ),
    };
    ctx.answer(inbound, &answer).await;
    None
}

/// `/usage`'s answer: the session's tokens and cost, read from its transcript off the
/// async workers (a long transcript takes a while to read).
async fn usage(ctx: &dyn CommandContext, key: &str) -> String {
    let store = ctx.store().clone();
    let session = key.to_owned();
    let read = tokio::task::spawn_blocking(move || store.entries(&session)).await;
    let entries = match read {
        Ok(Ok(entries)) => entries,
        Ok(Err(crate::store::StoreError::UnknownSession(_))) => Vec::new(),
        Ok(Err(e)) => return format!("Cannot read this session's transcript: {e}"),
        Err(e) => return format!("Cannot read this session's transcript: {e}"),
    };
    crate::agent::usage::summary(&entries, ctx.pricing(key), ctx.context_window(key))
        .unwrap_or_else(|| "No model call in this session yet.".to_owned())
}

/// `/stop`'s answer: what the stop did, wherever the session runs.
fn stop_answer(stopped: Stopped) -> String {
    let (report, children, node) = match stopped {
        Stopped::Here(report, children) => (report, children, None),
        Stopped::There(node, Some(done)) => match done {
            Ok((report, children)) => (Ok(report), children, Some(node)),
            Err(e) => (Err(e), 0, Some(node)),
        },
        Stopped::There(node, None) => {
            return format!(
                "The stop was handed to node {node}, which runs this session; it did not confirm in time."
            );
        }
        Stopped::Nowhere => return "Nothing to stop.".to_string(),
        Stopped::Unknown => {
            return "Which node runs this session could not be read (the database could not be reached): nothing was stopped. Try again.".to_string();
        }
        Stopped::NotHanded(node, busy) => return not_handed(&node, busy),
    };
    let answer = match report {
        Ok(report) if report.stopped_run => match report.cleared {
            0 => "Stopped.".to_string(),
            n => format!("Stopped. Dropped {n} queued message(s)."),
        },
        Ok(report) if report.cleared > 0 => {
            format!(
                "Nothing running. Dropped {} queued message(s).",
                report.cleared
            )
        }
        Ok(_) => "Nothing to stop.".to_string(),
        Err(e) => format!("Cannot stop: {e}"),
    };
    // Its sub-agents stop too, and their end is not reported back.
    let answer = match children {
        0 => answer,
        n if answer == "Nothing to stop." => format!("Stopped {n} subagent(s)."),
        n => format!("{answer} Stopped {n} subagent(s)."),
    };
    match node {
        Some(node) => format!("{answer} (on node {node})"),
        None => answer,
    }
}

/// A stop that never reached node `node`, which runs the session: nothing was stopped.
fn not_handed(node: &str, busy: bool) -> String {
    match busy {
        true => format!(
            "Node {node}, which runs this session, was too busy to take the stop: nothing was stopped. Try again."
        ),
        false => format!(
            "The stop could not be handed to node {node}, which runs this session (the database could not be reached): nothing was stopped."
        ),
    }
}

/// Stops the session and appends a `reset` entry (nothing is deleted).
async fn reset(ctx: &dyn CommandContext, key: &str, reason: &str) -> String {
    let _ = ctx.lanes().stop(key).await;
    let (store, owned_key, owned_reason) = (ctx.store().clone(), key.to_owned(), reason.to_owned());
    let written = ctx
        .lanes()
        .write_transcript(key, move || store.append_reset(&owned_key, &owned_reason))
        .await;
    match written {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return format!("Cannot reset: {e}"),
        Err(e) => return format!("Cannot reset: {e}"),
    }
    // A bound conversation resets its coding agent's session in place.
    let agent = match ctx.acp().binding(key) {
        None => String::new(),
        Some(binding) => match ctx.acp().reset(key).await {
            Ok(_) => format!(" ({} starts a fresh session)", binding.harness),
            Err(e) => format!(" ({} could not reset: {e})", binding.harness),
        },
    };
    match reason {
        "new" => format!("New session started.{agent}"),
        _ => format!("Session reset.{agent}"),
    }
}

/// `/compact`: summarizes all but the newest turn (SPEC 2, 7). The summary is a job of the
/// session's lane: it waits for a run going on, holds the lane while the model summarizes (so
/// a `/new` or a turn after it comes after it), and `/stop` cancels it.
async fn compact(ctx: &dyn CommandContext, key: &str) -> String {
    if ctx.acp().binding(key).is_some() {
        return "This conversation talks to a coding agent; /compact applies to chela's own agent."
            .to_string();
    }
    match ctx
        .lanes()
        .run_job(key, ctx.compactor(key.to_owned()))
        .await
    {
        Ok(Ok(Some(done))) => format!(
            "Compacted: {} earlier messages summarized (about {} -> {} tokens).",
            done.summarized, done.tokens_before, done.tokens_after
        ),
        Ok(Ok(None)) => "Nothing to compact yet.".to_string(),
        Ok(Err(e)) => format!("Cannot compact: {e}"),
        Err(e) => format!("Not compacted: {e}"),
    }
}

/// The agent id of session `key` (`agent:<id>:...`).
fn agent_of(key: &str) -> String {
    crate::domain::session_key::SessionKey::parse(key)
        .map(|k| k.agent)
        .unwrap_or_else(|_| "?".to_owned())
}

async fn status(ctx: &dyn CommandContext, key: &str) -> String {
    let mut lines = vec![
        format!("Session: {key}"),
        format!("Agent: {}", agent_of(key)),
        format!("Model: {}", model_line(ctx, key)),
    ];
    lines.extend(fallback_lines(ctx, key));
    match ctx.lanes().status(key).await {
        Ok(lane) => {
            lines.push(format!("Queue: {}", describe(&lane.settings)));
            lines.push(format!(
                "Run: {}; {} queued",
                if lane.running { "active" } else { "idle" },
                lane.queued
            ));
        }
        Err(e) => lines.push(format!("Run: unknown ({e})")),
    }
    if let Ok(Some(meta)) = ctx.store().get_session(key) {
        lines.push(format!("Transcript: {} entries", meta.entries));
    }
    if let Some(binding) = ctx.acp().status(key).await {
        lines.push(binding);
    }
    lines.extend(next_runs(ctx, key));
    lines.join("\n")
}

/// The next runs of session `key`'s scheduled jobs, soonest first (docs/schedules.md).
fn next_runs(ctx: &dyn CommandContext, key: &str) -> Vec<String> {
    let Ok(mut jobs) = ctx.store().cron_jobs() else {
        return Vec::new();
    };
    jobs.retain(|job| job.session_key == key);
    jobs.sort_by_key(|job| job.next_ms.unwrap_or(u64::MAX));
    jobs.iter()
        .filter_map(|job| {
            let next = crate::domain::schedule::iso(job.next_ms?);
            Some(format!(
                "Next run: {} at {next} ({})",
                job.id,
                job.schedule.describe()
            ))
        })
        .collect()
}

/// The buttons under `/queue`: each mode, and back to the defaults.
fn queue_choices() -> Vec<(String, String)> {
    let modes = ["steer", "followup", "collect", "interrupt"];
    let mut choices: Vec<(String, String)> = modes
        .iter()
        .map(|m| ((*m).to_owned(), format!("/queue {m}")))
        .collect();
    choices.push(("Reset".to_owned(), "/queue reset".to_owned()));
    choices
}

/// The menu under `/model` (none when there is nothing to choose): the models `[model]
/// models` allows or, when that list is empty and the sender may switch models, those the
/// provider's server lists; the first [`MENU_MODELS`] of them (the rest are typed), and
/// back to the default.
async fn model_choices(
    ctx: &dyn CommandContext,
    key: &str,
    inbound: &Inbound,
) -> Vec<(String, String)> {
    if !ctx.offers_menus(inbound) {
        return Vec::new();
    }
    let mut models = ctx.allowed_models().to_vec();
    models.retain(|m| !m.trim().is_empty());
    if models.is_empty() && ctx.may_choose_models(inbound) {
        models = match ctx.provider(key).models().await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::info!(error = %e, "/model: the model server's list could not be read");
                Vec::new()
            }
        };
    }
    if models.is_empty() {
        return Vec::new();
    }
    let mut choices: Vec<(String, String)> = models
        .iter()
        .take(MENU_MODELS)
        .map(|m| (m.clone(), format!("/model {m}")))
        .collect();
    choices.push(("Default".to_owned(), "/model default".to_owned()));
    choices
}

/// Models offered in `/model`'s menu at most (a Discord select menu holds 25 options, one is
/// Default).
const MENU_MODELS: usize = 24;

/// `provider/model` of session `key`, saying whether it is the session's own choice.
fn model_line(ctx: &dyn CommandContext, key: &str) -> String {
    let provider = ctx.provider(key);
    match crate::agent::model_choice::chosen(ctx.store(), key) {
        Some(model) => {
            let (chosen_provider, model) = provider.resolve(&model);
            let default = match chosen_provider == provider.name() {
                true => provider.model().to_owned(),
                false => format!("{}/{}", provider.name(), provider.model()),
            };
            format!("{chosen_provider}/{model} (this conversation's; default {default})")
        }
        None => format!("{}/{}", provider.name(), provider.model()),
    }
}

/// `/status`'s lines on the fallbacks: the agent's, what rests, and the session's last
/// fallback (which model answered instead of which, and why).
fn fallback_lines(ctx: &dyn CommandContext, key: &str) -> Vec<String> {
    let choice = crate::agent::model_choice::chosen(ctx.store(), key);
    let mut lines = ctx.provider(key).route_lines(choice.as_deref());
    if let Some(last) = crate::agent::model_choice::last_fallback(ctx.store(), key) {
        lines.push(format!(
            "Last fallback ({}): {} answered; skipped {}",
            crate::domain::schedule::iso(last.at_ms),
            last.answered,
            last.skipped.join("; ")
        ));
    }
    lines
}

/// `/model`, `/model NAME`, `/model default`.
async fn model(ctx: &dyn CommandContext, key: &str, args: &str) -> String {
    let allowed = ctx.allowed_models();
    let choices = || {
        if allowed.is_empty() {
            String::new()
        } else {
            format!("\nChoices: {}", allowed.join(", "))
        }
    };
    let name = args.trim();
    let choice = match name {
        "" => return format!("Model: {}{}", model_line(ctx, key), choices()),
        // Case as the routing's rule reads it (anyone may go back to the default).
        _ if name.eq_ignore_ascii_case("default") || name.eq_ignore_ascii_case("reset") => None,
        _ if name.chars().any(char::is_control) => {
            return "A model name cannot contain control characters.".to_owned();
        }
        _ if !allowed.is_empty() && !allowed.iter().any(|m| m == name) => {
            return format!("Unknown model {}.{}", excerpt(name), choices());
        }
        _ if name.contains(char::is_whitespace) => {
            return "Usage: /model [NAME|default]".to_owned();
        }
        _ => Some(name),
    };
    if let Some(why) = choice.and_then(|name| ctx.provider(key).unusable(name)) {
        return format!("Cannot switch to {}: {why}", excerpt(name));
    }
    if let Err(e) = crate::agent::model_choice::choose(ctx.store(), key, choice) {
        return format!("Cannot set the model: {e}");
    }
    // The transcript says from where on answers came from which model (SPEC 6); the entry
    // is the lane's to write, after a run going on.
    let provider = ctx.provider(key);
    let (provider, model_id) = match choice {
        Some(choice) => provider.resolve(choice),
        None => (provider.name().to_owned(), provider.model().to_owned()),
    };
    let kind = crate::store::EntryKind::ModelChange { provider, model_id };
    let (store, owned_key) = (ctx.store().clone(), key.to_owned());
    let cwd = ctx.workspace(key).display().to_string();
    let write = move || {
        store.ensure_session(&owned_key, &cwd)?;
        store.append(&owned_key, kind).map(|_| ())
    };
    match ctx.lanes().queue_transcript_write(key, write).await {
        Ok(written) => {
            tokio::spawn(async move {
                if let Ok(Err(e)) = written.await {
                    tracing::warn!(error = %e, "cannot record a model change in the transcript");
                }
            });
            format!("Model: {}", model_line(ctx, key))
        }
        Err(e) => format!(
            "Model: {} (the transcript does not record the change: {e})",
            model_line(ctx, key)
        ),
    }
}

/// `/think`, `/think LEVEL`, `/think default`: how much this session's model reasons.
fn think(ctx: &dyn CommandContext, key: &str, args: &str) -> String {
    use crate::agent::model_choice::{set_thinking, thinking};
    let arg = args.trim();
    let choice = match arg {
        "" => None,
        _ if arg.eq_ignore_ascii_case("default") || arg.eq_ignore_ascii_case("reset") => Some(None),
        _ => match arg.parse::<crate::config::Thinking>() {
            Ok(level) => Some(Some(level)),
            Err(_) => {
                return format!(
                    "Unknown level {}. Usage: /think off|minimal|low|medium|high|default",
                    excerpt(arg)
                );
            }
        },
    };
    if let Some(level) = choice
        && let Err(e) = set_thinking(ctx.store(), key, level)
    {
        return format!("Cannot set the thinking level: {e}");
    }
    let default = ctx.thinking(key);
    match thinking(ctx.store(), key) {
        Some(level) => format!("Thinking: {level} (this conversation's; default {default})"),
        None => format!("Thinking: {default}"),
    }
}

/// `/reasoning`, `/reasoning on|off`: whether this chat shows the model's reasoning.
fn reasoning(ctx: &dyn CommandContext, key: &str, args: &str) -> String {
    use crate::agent::model_choice::{reasoning_shown, show_reasoning};
    let arg = args.trim().to_ascii_lowercase();
    let set = match arg.as_str() {
        "" => None,
        "on" => Some(Some(true)),
        "off" | "default" => Some(None),
        _ => return "Usage: /reasoning on|off".to_owned(),
    };
    if let Some(shown) = set
        && let Err(e) = show_reasoning(ctx.store(), key, shown)
    {
        return format!("Cannot change it: {e}");
    }
    match reasoning_shown(ctx.store(), key) {
        true => "Reasoning: shown in this chat, collapsed, apart from the answer.".to_owned(),
        false => "Reasoning: not shown (/reasoning on shows it).".to_owned(),
    }
}

fn describe(s: &LaneSettings) -> String {
    format!(
        "{} (debounce {} ms, cap {}, drop {})",
        s.mode,
        s.debounce.as_millis(),
        s.cap,
        s.drop
    )
}

/// `/queue`, `/queue reset`, `/queue <mode> [debounce:500ms] [cap:N] [drop:P]`.
async fn queue(ctx: &dyn CommandContext, key: &str, args: &str) -> String {
    if args.is_empty() {
        return format!("Queue: {}", describe(&ctx.lanes().settings_for(key)));
    }
    if args.eq_ignore_ascii_case("reset") {
        return match ctx.lanes().set_settings(key, None).await {
            Ok(s) => format!("Queue reset to {}", describe(&s)),
            Err(e) => format!("Cannot change the queue: {e}"),
        };
    }
    match parse_queue_args(ctx.lanes().settings_for(key), args, ctx.queue_limits()) {
        Ok(settings) => match ctx.lanes().set_settings(key, Some(settings)).await {
            Ok(s) => format!("Queue: {}", describe(&s)),
            Err(e) => format!("Cannot change the queue: {e}"),
        },
        Err(e) => e.to_string(),
    }
}

/// Why `/queue` arguments were refused; the text is ready to show (values are excerpts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueArgsError {
    /// `debounce:` with no duration, or one past the operator's bound.
    #[error("Bad debounce: {given} (try 500ms or 2s; at most {max_ms}ms)")]
    Debounce {
        /// What was given (an excerpt).
        given: String,
        /// The longest allowed, in milliseconds.
        max_ms: u128,
    },
    /// `cap:` with no number from 1 to the operator's bound.
    #[error("Bad cap: {given} (a number from 1 to {max})")]
    Cap {
        /// What was given (an excerpt).
        given: String,
        /// The largest allowed.
        max: usize,
    },
    /// `drop:` with no known policy.
    #[error("Bad drop: {0} (summarize, old or new)")]
    Drop(String),
    /// A word that is no queue mode.
    #[error("Unknown queue mode: {0} (steer, followup, collect or interrupt)")]
    Mode(String),
}

/// Applies `/queue` arguments to `current`, within `limits` (issue #32.8: a chat could set
/// `cap:100000`).
pub fn parse_queue_args(
    mut current: LaneSettings,
    args: &str,
    limits: QueueLimits,
) -> Result<LaneSettings, QueueArgsError> {
    for word in args.split_whitespace() {
        let word = word.to_lowercase();
        if let Some(v) = word.strip_prefix("debounce:") {
            current.debounce = parse_duration(v)
                .filter(|d| *d <= limits.debounce)
                .ok_or_else(|| QueueArgsError::Debounce {
                    given: excerpt(v),
                    max_ms: limits.debounce.as_millis(),
                })?;
        } else if let Some(v) = word.strip_prefix("cap:") {
            current.cap = v
                .parse()
                .ok()
                .filter(|c| (1..=limits.cap).contains(c))
                .ok_or_else(|| QueueArgsError::Cap {
                    given: excerpt(v),
                    max: limits.cap,
                })?;
        } else if let Some(v) = word.strip_prefix("drop:") {
            current.drop = v
                .parse::<DropPolicy>()
                .map_err(|_| QueueArgsError::Drop(excerpt(v)))?;
        } else {
            current.mode = word
                .parse::<QueueMode>()
                .map_err(|_| QueueArgsError::Mode(excerpt(&word)))?;
        }
    }
    Ok(current)
}

/// `500ms`, `2s`, `1.5s` or bare milliseconds, at most [`crate::config::MAX_TIMEOUT`] (as
/// `queue.debounce_ms`); `None` otherwise (`inf`, `1e30s` and the like included).
fn parse_duration(v: &str) -> Option<Duration> {
    let parsed = if let Some(ms) = v.strip_suffix("ms") {
        ms.parse().ok().map(Duration::from_millis)
    } else if let Some(s) = v.strip_suffix('s') {
        s.parse::<f64>()
            .ok()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
    } else {
        v.parse().ok().map(Duration::from_millis)
    };
    parsed.filter(|d| *d <= crate::config::MAX_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> LaneSettings {
        LaneSettings {
            mode: QueueMode::Steer,
            debounce: Duration::from_millis(500),
            cap: 20,
            drop: DropPolicy::Summarize,
        }
    }

    const LIMITS: QueueLimits = QueueLimits {
        cap: 100,
        debounce: Duration::from_secs(10),
    };

    #[test]
    fn queue_args_set_each_field() {
        for bad in [
            "debounce:1e30s",
            "debounce:infs",
            "debounce:-1s",
            "debounce:86400001",
        ] {
            assert!(parse_queue_args(base(), bad, LIMITS).is_err(), "{bad}");
        }
        let s = parse_queue_args(base(), "collect debounce:2s cap:5 drop:old", LIMITS).unwrap();
        assert_eq!(s.mode, QueueMode::Collect);
        assert_eq!(s.debounce, Duration::from_secs(2));
        assert_eq!(s.cap, 5);
        assert_eq!(s.drop, DropPolicy::Old);
    }

    #[test]
    fn bad_queue_args_echo_only_a_short_excerpt() {
        let long = format!("x{}", "y".repeat(5000));
        let err = parse_queue_args(base(), &long, LIMITS)
            .unwrap_err()
            .to_string();
        assert!(err.chars().count() < 120, "{err}");
        assert!(err.contains("xyyy") && err.contains('…'), "{err}");
        let err = parse_queue_args(base(), &format!("cap:{long}"), LIMITS)
            .unwrap_err()
            .to_string();
        assert!(err.chars().count() < 120, "{err}");
        let err = parse_queue_args(base(), "drop:a\u{1b}[31m", LIMITS)
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\u{1b}'), "{err:?}");
    }

    #[test]
    fn bad_queue_args_say_what_is_expected() {
        assert!(
            parse_queue_args(base(), "sideways", LIMITS)
                .unwrap_err()
                .to_string()
                .contains("steer, followup")
        );
        assert!(
            parse_queue_args(base(), "cap:0", LIMITS)
                .unwrap_err()
                .to_string()
                .contains("from 1 to 100")
        );
    }

    #[test]
    fn queue_numbers_stay_within_the_operators_bounds() {
        // Issue #32.8: `/queue cap:100000` was taken from anyone.
        let err = parse_queue_args(base(), "cap:100000", LIMITS).unwrap_err();
        assert_eq!(err.to_string(), "Bad cap: 100000 (a number from 1 to 100)");
        assert_eq!(
            parse_queue_args(base(), "cap:100", LIMITS).unwrap().cap,
            100
        );
        for long in ["debounce:11s", "debounce:10001ms", "debounce:10001"] {
            let err = parse_queue_args(base(), long, LIMITS).unwrap_err();
            assert!(err.to_string().contains("at most 10000ms"), "{long}: {err}");
        }
        let s = parse_queue_args(base(), "debounce:10s", LIMITS).unwrap();
        assert_eq!(s.debounce, Duration::from_secs(10));
        // Numbers a Duration cannot hold are refused, not a panic.
        for huge in [
            "debounce:1e30s",
            "debounce:infs",
            "debounce:nans",
            "debounce:-1s",
        ] {
            assert!(
                matches!(
                    parse_queue_args(base(), huge, LIMITS),
                    Err(QueueArgsError::Debounce { .. })
                ),
                "{huge}"
            );
        }
    }

    #[test]
    fn the_bounds_never_fall_below_the_operators_own_defaults() {
        let config = crate::config::QueueConfig {
            cap: 500,
            debounce_ms: 60_000,
            ..Default::default()
        };
        let limits = config.limits();
        assert_eq!(
            (limits.cap, limits.debounce),
            (500, Duration::from_secs(60))
        );
        let limits = crate::config::QueueConfig::default().limits();
        assert_eq!(
            (limits.cap, limits.debounce),
            (100, Duration::from_secs(10))
        );
    }
}
