//! chela against the floor: the release `chela gateway` and a minimal Python long-polling
//! bot with no store (`benches/floor/echo_bot.py`), one after the other on the same fake
//! Telegram; chela's model is a `FakeModel` that answers at once.
//!
//! Run with `cargo bench --bench floor` (release profile; needs `python3`). Reports figures
//! only; nothing here asserts a time. `CHELA_BENCH_ROUNDS` rounds (3) of each contestant,
//! each in a fresh fake and a fresh store; the floor runs `CHELA_FLOOR_WORKERS` (32) sending
//! threads. Per round:
//! - **latency**: [`SEQ`] messages one after another in one DM (after [`WARMUP`]), from the
//!   user's message to the answer being the bot's last message in the chat.
//! - **burst**: [`BURST_USERS`] users send [`BURST_EACH`] messages each at once; time until
//!   every answer is there.
//! - **load**: [`LOAD_USERS`] users send [`LOAD_EACH`] messages each at once; time, replies
//!   per second, and the contestant's CPU (user + system, all threads, from `/proc`) per
//!   reply, with the bench process's (the fakes') beside it.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use chela_testkit::telegram::{ChatSpec, UserSpec};
use chela_testkit::{FakeModel, FakeTelegram};
use common::{BenchResult, env_or, tg_gateway};
use tokio::process::{Child, Command};

/// Measured sequential messages.
const SEQ: usize = 100;
/// Unmeasured messages before them.
const WARMUP: usize = 5;
/// Users of the burst section.
const BURST_USERS: i64 = 20;
/// Messages each of them sends at once.
const BURST_EACH: usize = 5;
/// Users of the load section.
const LOAD_USERS: i64 = 500;
/// Messages each of them sends at once.
const LOAD_EACH: usize = 2;
/// Longest wait for one answer, or for a section's answers.
const TIMEOUT: Duration = Duration::from_secs(60);
/// How often a section checks for its answers.
const POLL: Duration = Duration::from_millis(5);
/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`, 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

/// Who answers.
#[derive(Clone, Copy)]
enum Contestant {
    /// The release gateway, queue mode `followup`, default logging (`info`).
    Chela,
    /// `echo_bot.py` with this many sending threads.
    Floor(usize),
}

impl Contestant {
    fn name(self) -> String {
        match self {
            Contestant::Chela => "chela".to_owned(),
            Contestant::Floor(workers) => format!("floor ({workers} threads)"),
        }
    }
}

/// One round's figures.
struct Figures {
    latency_p50: Duration,
    latency_mean: Duration,
    burst: Duration,
    load: Duration,
    /// Contestant CPU per reply in the load section.
    cpu_per_reply: Duration,
    /// The bench process's CPU per reply in the load section.
    fakes_per_reply: Duration,
    /// Telegram calls per reply in the load section, `getUpdates` left out.
    calls_per_reply: f64,
    /// The same by method.
    by_method: String,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> BenchResult {
    let rounds = env_or("CHELA_BENCH_ROUNDS", 3);
    let workers = env_or("CHELA_FLOOR_WORKERS", 32);
    let mut rows = Vec::new();
    for contestant in [Contestant::Chela, Contestant::Floor(workers)] {
        let mut figures = Vec::with_capacity(rounds);
        for r in 0..rounds {
            let f = round(contestant).await?;
            eprintln!(
                "{} round {}: p50 {:.2} ms, burst {:.0} ms, load {:.0} ms, {:.2} ms CPU/reply; calls per reply: {}",
                contestant.name(),
                r + 1,
                ms(f.latency_p50),
                ms(f.burst),
                ms(f.load),
                ms(f.cpu_per_reply),
                f.by_method
            );
            figures.push(f);
        }
        rows.push((contestant.name(), figures));
    }
    print_table(&rows);
    Ok(())
}

/// One round of `contestant` on fresh fakes.
async fn round(contestant: Contestant) -> BenchResult<Figures> {
    let model = FakeModel::start().await?;
    let tg = FakeTelegram::start().await?;
    let dir = tempfile::tempdir()?;
    let mut child = spawn(contestant, dir.path(), &model, &tg)?;
    tg_gateway::wait_polling(&tg).await?;
    let pid = child.id().ok_or("the contestant exited")?;
    let (latency_p50, latency_mean) = latency(&tg).await?;
    let burst = answered_in(&tg, 2_001, BURST_USERS, BURST_EACH).await?;
    let calls_before = tg.calls().len();
    let (cpu_before, fakes_before) = (cpu_ticks(pid)?, cpu_ticks(std::process::id())?);
    let load = answered_in(&tg, 10_001, LOAD_USERS, LOAD_EACH).await?;
    let (cpu_after, fakes_after) = (cpu_ticks(pid)?, cpu_ticks(std::process::id())?);
    let replies = LOAD_USERS as f64 * LOAD_EACH as f64;
    let per_reply = |ticks: u64| Duration::from_secs_f64(ticks as f64 / TICKS_PER_S / replies);
    let (calls_per_reply, by_method) = calls_since(&tg, calls_before, replies);
    let figures = Figures {
        latency_p50,
        latency_mean,
        burst,
        load,
        cpu_per_reply: per_reply(cpu_after.saturating_sub(cpu_before)),
        fakes_per_reply: per_reply(fakes_after.saturating_sub(fakes_before)),
        calls_per_reply,
        by_method,
    };
    let _ = child.start_kill();
    let _ = child.wait().await;
    Ok(figures)
}

/// Starts `contestant` against the fakes, its home and store in `dir`.
fn spawn(
    contestant: Contestant,
    dir: &Path,
    model: &FakeModel,
    tg: &FakeTelegram,
) -> BenchResult<Child> {
    match contestant {
        Contestant::Chela => {
            let queue = "[queue]\nmode = \"followup\"\ncap = 100\n";
            tg_gateway::write_config(dir, model, tg, queue)?;
            let bin = common::chela_binary();
            tg_gateway::spawn_with(&bin, dir, &[("RUST_LOG", "info")])
        }
        Contestant::Floor(workers) => {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/floor/echo_bot.py");
            Ok(Command::new("python3")
                .arg(script)
                .arg(tg.api_url())
                .arg(tg.token())
                .arg(workers.to_string())
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .kill_on_drop(true)
                .spawn()?)
        }
    }
}

/// p50 and mean of [`SEQ`] answers one after another in one DM.
async fn latency(tg: &FakeTelegram) -> BenchResult<(Duration, Duration)> {
    let (chat, user) = (ChatSpec::private(42), UserSpec::new(42, "Ann"));
    let mut samples = Vec::with_capacity(SEQ);
    for i in 0..WARMUP + SEQ {
        let want = format!("ok: seq {i}");
        let t0 = Instant::now();
        tg.user_sends(chat.clone(), user.clone(), &format!("seq {i}"));
        let last_is = |t: &FakeTelegram| t.sent(42).last().is_some_and(|m| m.text == want);
        if !tg.wait_for(last_is, TIMEOUT).await {
            return Err(format!("no answer to seq {i}").into());
        }
        if i >= WARMUP {
            samples.push(t0.elapsed());
        }
    }
    let summary = common::Summary::of(&samples).ok_or("no samples")?;
    Ok((summary.p50, summary.mean))
}

/// Users `first..first + users` each send `each` messages at once; the time until every
/// answer is there.
async fn answered_in(
    tg: &FakeTelegram,
    first: i64,
    users: i64,
    each: usize,
) -> BenchResult<Duration> {
    let t0 = Instant::now();
    for id in first..first + users {
        let (chat, user) = (ChatSpec::private(id), UserSpec::new(id, &format!("U{id}")));
        for k in 0..each {
            tg.user_sends(chat.clone(), user.clone(), &format!("u{id} m{k}"));
        }
    }
    let mut waiting: HashSet<i64> = (first..first + users).collect();
    while !waiting.is_empty() {
        if t0.elapsed() > TIMEOUT {
            return Err(format!("{} of {users} chats not answered", waiting.len()).into());
        }
        tokio::time::sleep(POLL).await;
        waiting.retain(|&id| {
            let want: HashSet<String> = (0..each).map(|k| format!("ok: u{id} m{k}")).collect();
            let sent = tg.sent(id);
            sent.iter().filter(|m| want.contains(&m.text)).count() < each
        });
    }
    Ok(t0.elapsed())
}

/// The fake's calls after the first `from`, `getUpdates` left out, per reply: in all and
/// by method.
fn calls_since(tg: &FakeTelegram, from: usize, replies: f64) -> (f64, String) {
    let mut by_method = std::collections::BTreeMap::<String, usize>::new();
    for call in tg.calls().iter().skip(from) {
        if call.method != "getupdates" {
            *by_method.entry(call.method.clone()).or_default() += 1;
        }
    }
    let total = by_method.values().sum::<usize>() as f64 / replies;
    let list: Vec<String> = by_method
        .iter()
        .map(|(method, n)| format!("{method} {:.2}", *n as f64 / replies))
        .collect();
    (total, list.join(", "))
}

/// User + system clock ticks of process `pid`, all its threads.
fn cpu_ticks(pid: u32) -> BenchResult<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').ok_or("unreadable /proc stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    Ok(field(11).unwrap_or(0) + field(12).unwrap_or(0))
}

/// The median of `pick` over `figures`.
fn median(figures: &[Figures], pick: impl Fn(&Figures) -> f64) -> f64 {
    let mut values: Vec<f64> = figures.iter().map(pick).collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Milliseconds of `d`.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The medians of every contestant's rounds.
fn print_table(rows: &[(String, Vec<Figures>)]) {
    let load_replies = LOAD_USERS as f64 * LOAD_EACH as f64;
    println!(
        "{:<20} {:>11} {:>11} {:>14} {:>14} {:>11} {:>13} {:>13} {:>10}",
        "median of rounds",
        "p50 ms",
        "mean ms",
        "burst 20x5 ms",
        "load 500x2 ms",
        "replies/s",
        "CPU/reply ms",
        "fakes ms",
        "calls"
    );
    for (name, figures) in rows {
        let load_s = median(figures, |f| f.load.as_secs_f64());
        println!(
            "{:<20} {:>11.2} {:>11.2} {:>14.0} {:>14.0} {:>11.0} {:>13.2} {:>13.2} {:>10.2}",
            name,
            median(figures, |f| ms(f.latency_p50)),
            median(figures, |f| ms(f.latency_mean)),
            median(figures, |f| ms(f.burst)),
            load_s * 1000.0,
            load_replies / load_s,
            median(figures, |f| ms(f.cpu_per_reply)),
            median(figures, |f| ms(f.fakes_per_reply)),
            median(figures, |f| f.calls_per_reply),
        );
    }
}
