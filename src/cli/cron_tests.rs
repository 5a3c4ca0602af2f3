use clap::Parser;
use clap::error::ErrorKind;

use super::*;

#[derive(Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    command: CronCommand,
}

fn parse(args: &[&str]) -> Result<CronCommand, ErrorKind> {
    let mut argv = vec!["cron"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv)
        .map(|c| c.command)
        .map_err(|e| e.kind())
}

fn add(args: &[&str]) -> AddArgs {
    let mut argv = vec!["add"];
    argv.extend_from_slice(args);
    match parse(&argv) {
        Ok(CronCommand::Add(a)) => a,
        other => panic!("{argv:?}: {other:?}"),
    }
}

/// 2025-01-01T00:00:00Z.
const NOW: u64 = 1_735_689_600_000;

#[test]
fn the_actions_parse() {
    assert_eq!(parse(&["list"]), Ok(CronCommand::List { json: false }));
    assert_eq!(
        parse(&["list", "--json"]),
        Ok(CronCommand::List { json: true })
    );
    assert_eq!(
        parse(&["rm", "j1"]),
        Ok(CronCommand::Rm { id: "j1".into() })
    );
    assert_eq!(
        parse(&["run", "j1"]),
        Ok(CronCommand::Run { id: "j1".into() })
    );
    let a = add(&[
        "--every",
        "2s",
        "--message",
        "hi",
        "--id",
        "tick",
        "--missed",
        "skip",
    ]);
    assert_eq!(
        (a.every.as_deref(), a.message.as_str(), a.id.as_deref()),
        (Some("2s"), "hi", Some("tick"))
    );
    assert_eq!(a.missed.as_deref(), Some("skip"));
    assert!(a.check(NOW).is_ok());
}

#[test]
fn exactly_one_schedule_and_known_values_are_required() {
    assert_eq!(
        parse(&["add", "--message", "hi"]).unwrap_err(),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        parse(&["add", "-m", "hi", "--every", "1h", "--at", "in 5m"]).unwrap_err(),
        ErrorKind::ArgumentConflict
    );
    // A zone belongs to a cron expression.
    assert_eq!(
        parse(&["add", "-m", "hi", "--every", "1h", "--tz", "Europe/Berlin"]).unwrap_err(),
        ErrorKind::ArgumentConflict
    );
    assert_eq!(
        parse(&["add", "-m", "hi", "--every", "1h", "--missed", "later"]).unwrap_err(),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        parse(&["rm"]).unwrap_err(),
        ErrorKind::MissingRequiredArgument
    );
}

#[test]
fn a_bad_value_names_its_flag() {
    let flag = |args: &[&str]| add(args).check(NOW).unwrap_err().flag;
    assert_eq!(flag(&["-m", "hi", "--cron", "61 * * * *"]), "--cron");
    assert_eq!(
        flag(&["-m", "hi", "--cron", "30 14 * * 3", "--tz", "Mars/Olympus"]),
        "--cron/--tz"
    );
    assert_eq!(flag(&["-m", "hi", "--every", "soon"]), "--every");
    assert_eq!(flag(&["-m", "hi", "--at", "2020-01-01T00:00:00Z"]), "--at");
    assert_eq!(flag(&["-m", "hi", "--at", "tomorrowish"]), "--at");
    assert_eq!(flag(&["-m", "hi", "--every", "1h", "--id", "a b"]), "--id");
    assert_eq!(
        flag(&[
            "-m",
            "hi",
            "--every",
            "1h",
            "--id",
            chela::cron::HEARTBEAT_ID
        ]),
        "--id"
    );
    assert_eq!(
        flag(&["-m", "hi", "--every", "1h", "--session", "not a key"]),
        "--session"
    );
    assert_eq!(flag(&["-m", "  ", "--every", "1h"]), "--message");
}

#[test]
fn good_schedules_pass_the_check() {
    for args in [
        &[
            "-m",
            "report",
            "--cron",
            "30 14 * * 3",
            "--tz",
            "Europe/Berlin",
        ][..],
        &["-m", "report", "--cron", "0 9 * * 1-5"],
        &["-m", "ping", "--at", "in 20m"],
        &["-m", "ping", "--at", "2030-01-31T09:00:00+01:00"],
        &[
            "-m",
            "ping",
            "--every",
            "30m",
            "--session",
            "agent:main:telegram:direct:42",
        ],
    ] {
        let a = add(args);
        assert_eq!(a.check(NOW), Ok(()), "{args:?}");
    }
}

#[test]
fn a_direct_add_follows_the_gateways_rules_and_keeps_config_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = chela::config::Config::default();
    config.store.path = dir.path().join("data");
    config.terminal.user = "tester".into();
    let store = Store::open_config(&config).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let args = add(&["-m", "stretch", "--every", "1h", "--id", "s1"]);
        let Ok(Outcome::Added(job, known)) =
            direct(&store, &config, &CronCommand::Add(args.clone())).await
        else {
            panic!("not added");
        };
        assert_eq!(job.session_key, "agent:main:terminal:direct:tester");
        assert_eq!(job.origin, CronOrigin::Operator);
        assert!(!known, "the session never answered anywhere");
        // The same id again is refused, as in the gateway.
        let again = direct(&store, &config, &CronCommand::Add(args)).await;
        assert!(matches!(again, Err(e) if e.contains("exists already")));
        // A config job stays in the config.
        let mut config_job = job.clone();
        config_job.id = "weekly".into();
        config_job.origin = CronOrigin::Config;
        store.put_cron(&config_job).await.unwrap();
        let rm = CronCommand::Rm {
            id: "weekly".into(),
        };
        assert!(matches!(direct(&store, &config, &rm).await, Err(e) if e.contains("config")));
        // Running needs the gateway.
        let run = CronCommand::Run { id: "s1".into() };
        assert!(matches!(direct(&store, &config, &run).await, Err(e) if e.contains("no gateway")));
        let rm = CronCommand::Rm { id: "s1".into() };
        assert!(
            matches!(direct(&store, &config, &rm).await, Ok(Outcome::Removed(j)) if j.id == "s1")
        );
        let list = direct(&store, &config, &CronCommand::List { json: false }).await;
        assert!(
            matches!(list, Ok(Outcome::Jobs(jobs)) if jobs.len() == 1 && jobs[0].id == "weekly")
        );
    });
}
