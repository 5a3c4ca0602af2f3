//! Reply delivery through a fault storm: the release `chela gateway` binary against
//! `FakeTelegram` and a zero-delay `FakeModel`, queue mode `followup`.
//!
//! Run with `cargo bench --bench storm` (or `benches/run.sh storm`). Reports figures only;
//! nothing here asserts a time.
//!
//! [`CHATS`] users each send [`PER_CHAT`] messages at once (all waiting before the gateway's
//! first poll); the drain is the time from the gateway's first `getUpdates` until every reply
//! `ok: <text>` is in the fake. Each drain has a fresh gateway and fake: fault-free, or with
//! the storm of issue #10 (30% 429s with `retry_after` 1 s, 4% JSON 500s, 3% HTML
//! 502s, 2% dropped connections on sends, edits and deletes). Also reported: the storm's
//! fault counts, and replies missing or duplicated at the end.
//!
//! Everything runs for two models: one that answers at once, where the drain is bounded below
//! by the 429s' `retry_after` (about 20 one-second waits per chat, against well under a
//! second fault-free), and one that takes [`SLOW_MODEL_MS`] per answer (the fake's
//! `after` directive), where the storm's waits overlap the next turns because delivery does
//! not hold the session's lane. `CHELA_BENCH_BIN` measures another `chela` binary.
//!
//! Which chat the storm's 429s hit depends on timing, and the unluckiest chat sets the drain,
//! so one storm drain is a single draw: each model runs [`ROUNDS`] storm drains (seeds
//! [`SEED`], `SEED + 1`, ...; `CHELA_BENCH_STORM_ROUNDS` sets how many) against one fault-free
//! drain, and the median ratio (the upper of the middle two for an even count) is reported
//! beside each round's.

use std::time::{Duration, Instant};

use chela_testkit::telegram::{ChatSpec, Faults, UserSpec};
use chela_testkit::{FakeModel, FakeTelegram};

mod common;

use common::{BenchResult, env_or, tg_gateway};

/// Chats (DMs) of the drain.
const CHATS: i64 = 5;
/// Messages per chat.
const PER_CHAT: usize = 40;
/// Longest wait for the drain (reported as partial after it).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);
/// The slow model's time per answer, in ms.
const SLOW_MODEL_MS: u64 = 250;
/// How often the drain checks for its replies.
const POLL: Duration = Duration::from_millis(5);
/// Storm drains per model (`CHELA_BENCH_STORM_ROUNDS`).
const ROUNDS: usize = 5;
/// The first round's seed; each next round takes the next one.
const SEED: u64 = 0x5EED;

/// The storm of issue #10, drawn from `seed`.
fn storm(seed: u64) -> Faults {
    Faults {
        seed,
        too_many_requests: 0.30,
        retry_after_s: 1,
        internal_error: 0.04,
        bad_gateway_html: 0.03,
        dropped: 0.02,
        answer_lost: 0.0,
    }
}

/// What one drain measured.
struct Drain {
    took: Duration,
    delivered: usize,
    duplicated: usize,
    faults: String,
}

/// One drain of [`CHATS`] x [`PER_CHAT`] messages, with `faults` injected if given and each
/// answer taking `model_ms` (0: at once).
async fn drain(faults: Option<Faults>, model_ms: u64) -> BenchResult<Drain> {
    let model = FakeModel::start().await?;
    let tg = FakeTelegram::start().await?;
    let dir = tempfile::tempdir()?;
    let queue = "[queue]\nmode = \"followup\"\ncap = 100\n";
    tg_gateway::write_config(dir.path(), &model, &tg, queue)?;
    if let Some(faults) = faults {
        tg.inject_faults(faults);
    }
    let ids: Vec<i64> = (301..301 + CHATS).collect();
    for k in 0..PER_CHAT {
        for &id in &ids {
            let (chat, user) = (ChatSpec::private(id), UserSpec::new(id, &format!("U{id}")));
            let text = match model_ms {
                0 => format!("c{id} m{k:02}"),
                ms => format!("after {ms} c{id} m{k:02}"),
            };
            tg.user_sends(chat, user, &text);
        }
    }
    let mut child = tg_gateway::spawn(&common::chela_binary(), dir.path())?;
    tg_gateway::wait_polling(&tg).await?;
    let t0 = Instant::now();
    let total = ids.len() * PER_CHAT;
    let count = || -> usize {
        ids.iter()
            .map(|&id| {
                tg.sent(id)
                    .iter()
                    .filter(|m| !m.deleted && m.text.starts_with("ok: "))
                    .count()
            })
            .sum()
    };
    let deadline = t0 + DRAIN_TIMEOUT;
    while count() < total && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
    }
    let took = t0.elapsed();
    let mut delivered = 0;
    let mut duplicated = 0;
    for &id in &ids {
        let texts: Vec<String> = tg.sent(id).into_iter().map(|m| m.text).collect();
        for k in 0..PER_CHAT {
            let want = format!("ok: c{id} m{k:02}");
            match texts.iter().filter(|t| **t == want).count() {
                0 => {}
                1 => delivered += 1,
                n => {
                    delivered += 1;
                    duplicated += n - 1;
                }
            }
        }
    }
    let counts = tg.fault_counts();
    child.start_kill()?;
    let _ = child.wait().await;
    Ok(Drain {
        took,
        delivered,
        duplicated,
        faults: format!(
            "429 {}, 500 {}, 502 {}, dropped {}",
            counts.too_many_requests,
            counts.internal_error,
            counts.bad_gateway_html,
            counts.dropped
        ),
    })
}

fn main() -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let rounds = env_or("CHELA_BENCH_STORM_ROUNDS", ROUNDS).max(1);
    runtime.block_on(async {
        println!(
            "chela storm bench: release `chela gateway` vs FakeTelegram, {CHATS} chats x \
             {PER_CHAT} messages, queue mode followup, {rounds} storm round(s)"
        );
        for model_ms in [0, SLOW_MODEL_MS] {
            println!("model answering in {model_ms} ms:");
            let clean = drain(None, model_ms).await?;
            print_drain("fault-free", &clean);
            let mut ratios = Vec::with_capacity(rounds);
            for (round, seed) in (SEED..).take(rounds).enumerate() {
                let stormy = drain(Some(storm(seed)), model_ms).await?;
                let ratio = stormy.took.as_secs_f64() / clean.took.as_secs_f64().max(1e-9);
                print_drain(&format!("storm {}", round + 1), &stormy);
                println!("  {:<10}  storm / fault-free drain: {ratio:.2}x", "");
                ratios.push(ratio);
            }
            ratios.sort_by(f64::total_cmp);
            println!(
                "  median storm / fault-free drain over {rounds} round(s): {:.2}x (lowest {:.2}x, highest {:.2}x)",
                ratios[ratios.len() / 2],
                ratios[0],
                ratios[ratios.len() - 1]
            );
        }
        Ok(())
    })
}

/// Prints one drain's line.
fn print_drain(name: &str, d: &Drain) {
    let total = CHATS as usize * PER_CHAT;
    println!(
        "  {name:<10}  drain {:>8.2} s  delivered {}/{total}  duplicated {}  faults: {}",
        d.took.as_secs_f64(),
        d.delivered,
        d.duplicated,
        d.faults
    );
}
