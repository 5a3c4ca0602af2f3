//! Waiting behind others (issue #12.10): 20 Telegram users each send 5 messages, one after
//! the other, to a model that takes about a second per answer (`slow 100 10` of the fake
//! model: ten words, 100 ms apart). Reported per message: the time until the user sees the
//! first text (the first preview) and until the whole answer is there, as medians and p99.
//!
//! Run with `cargo bench --bench waiting` (or `benches/run.sh waiting`). Reports figures
//! only. `CHELA_BENCH_BIN` runs another `chela` binary (an older build, for a before figure);
//! `CHELA_BENCH_MAX_RUNS` sets `agent.max_concurrent_runs` (unset: the binary's default).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chela_testkit::telegram::{ChatSpec, UserSpec};
use chela_testkit::{FakeModel, FakeTelegram};
use common::{BenchResult, Summary, ms, row, table, tg_gateway};

/// Users, each in their own DM.
const USERS: i64 = 20;
/// Messages each user sends, each after the answer to the one before.
const PER_USER: usize = 5;
/// What each user asks: ten words 100 ms apart, about one second.
const ASK: &str = "slow 100 10";
/// How often a user looks at the chat.
const POLL: Duration = Duration::from_millis(5);
/// Longest wait for one answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The whole answer to [`ASK`].
fn answer() -> String {
    (1..=10)
        .map(|i| format!("tick {i} "))
        .collect::<String>()
        .trim_end()
        .to_owned()
}

/// One message's figures: until the first text, until the whole answer.
type Sample = (Duration, Duration);

/// One user's conversation: send, wait for the answer, again.
async fn converse(tg: Arc<FakeTelegram>, id: i64) -> BenchResult<Vec<Sample>> {
    let want = answer();
    let mut samples = Vec::new();
    for _ in 0..PER_USER {
        let before = tg.sent(id).len();
        let sent = Instant::now();
        tg.user_sends(
            ChatSpec::private(id),
            UserSpec::new(id, &format!("U{id}")),
            ASK,
        );
        let mut first = None;
        loop {
            let messages = tg.sent(id);
            if first.is_none() && messages.len() > before {
                first = Some(sent.elapsed());
            }
            if messages.len() > before && messages.last().is_some_and(|m| m.text.trim_end() == want)
            {
                let whole = sent.elapsed();
                samples.push((first.unwrap_or(whole), whole));
                break;
            }
            if sent.elapsed() > ANSWER_TIMEOUT {
                return Err(format!("user {id}: no answer within {ANSWER_TIMEOUT:?}").into());
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(samples)
}

fn main() -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let model = FakeModel::start().await?;
        let tg = Arc::new(FakeTelegram::start().await?);
        let dir = tempfile::tempdir()?;
        let max_runs = std::env::var("CHELA_BENCH_MAX_RUNS")
            .map(|n| format!("max_concurrent_runs = {n}\n"))
            .unwrap_or_default();
        tg_gateway::write_config(dir.path(), &model, &tg, &max_runs)?;
        let bin = common::chela_binary();
        let mut child = tg_gateway::spawn(&bin, dir.path())?;
        tg_gateway::wait_polling(&tg).await?;
        let users: Vec<_> = (1..=USERS)
            .map(|id| tokio::spawn(converse(tg.clone(), 500 + id)))
            .collect();
        let mut firsts = Vec::new();
        let mut wholes = Vec::new();
        for user in users {
            for (first, whole) in user.await?? {
                firsts.push(first);
                wholes.push(whole);
            }
        }
        child.start_kill()?;
        let _ = child.wait().await;
        let first = Summary::of(&firsts).ok_or("no samples")?;
        let whole = Summary::of(&wholes).ok_or("no samples")?;
        table(
            &format!(
                "waiting: {USERS} users x {PER_USER} messages, a ~1 s model ({}, max runs {})",
                bin.display(),
                std::env::var("CHELA_BENCH_MAX_RUNS").unwrap_or_else(|_| "default".into())
            ),
            &[
                row("first text p50", ms(first.p50)),
                row("first text p99", ms(first.p99)),
                row("whole answer p50", ms(whole.p50)),
                row("whole answer p99", ms(whole.p99)),
            ],
        );
        Ok(())
    })
}
