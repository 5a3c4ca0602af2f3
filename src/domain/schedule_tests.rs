use super::*;

/// `2025-03-26T13:30:00Z` and the like as epoch ms.
fn ms(iso: &str) -> u64 {
    u64::try_from(jiff::Timestamp::from_str(iso).unwrap().as_millisecond()).unwrap()
}

#[test]
fn weekly_berlin_job_keeps_wall_clock_time_across_both_dst_changes() {
    // Wednesdays 14:30 in Berlin: 13:30Z in winter (CET), 12:30Z in summer (CEST).
    let s = Schedule::cron("30 14 * * 3", Some("Europe/Berlin")).unwrap();
    let mut at = ms("2025-03-20T00:00:00Z");
    let mut runs = Vec::new();
    for _ in 0..2 {
        at = s.next_after(at).unwrap().unwrap();
        runs.push(iso(at));
    }
    // DST starts on Sunday 2025-03-30.
    assert_eq!(runs, ["2025-03-26T13:30:00Z", "2025-04-02T12:30:00Z"]);
    let mut at = ms("2025-10-20T00:00:00Z");
    let mut runs = Vec::new();
    for _ in 0..2 {
        at = s.next_after(at).unwrap().unwrap();
        runs.push(iso(at));
    }
    // DST ends on Sunday 2025-10-26.
    assert_eq!(runs, ["2025-10-22T12:30:00Z", "2025-10-29T13:30:00Z"]);
}

#[test]
fn a_time_in_the_spring_gap_runs_after_it_and_one_in_the_autumn_overlap_runs_once() {
    let s = Schedule::cron("30 2 * * *", Some("Europe/Berlin")).unwrap();
    // 2025-03-30 02:30 does not exist in Berlin: the run comes right after the gap (03:00
    // CEST = 01:00Z), once.
    let gap = s.next_after(ms("2025-03-29T12:00:00Z")).unwrap().unwrap();
    assert_eq!(iso(gap), "2025-03-30T01:00:00Z");
    let after = s.next_after(gap).unwrap().unwrap();
    assert_eq!(iso(after), "2025-03-31T00:30:00Z");
    // 2025-10-26 02:30 happens twice: it runs at the first (CEST, 00:30Z) only.
    let first = s.next_after(ms("2025-10-25T12:00:00Z")).unwrap().unwrap();
    assert_eq!(iso(first), "2025-10-26T00:30:00Z");
    let next = s.next_after(first).unwrap().unwrap();
    assert_eq!(iso(next), "2025-10-27T01:30:00Z");
}

#[test]
fn cron_needs_five_fields_and_a_known_zone() {
    assert!(Schedule::cron("30 14 * * 3", None).is_ok());
    assert!(matches!(
        Schedule::cron("0 30 14 * * 3", None),
        Err(ScheduleError::Cron { .. })
    ));
    assert!(matches!(
        Schedule::cron("61 * * * *", None),
        Err(ScheduleError::Cron { .. })
    ));
    assert_eq!(
        Schedule::cron("* * * * *", Some("Mars/Olympus")),
        Err(ScheduleError::TimeZone("Mars/Olympus".into()))
    );
}

#[test]
fn a_zone_on_a_host_without_a_zone_database_says_to_install_tzdata() {
    // This host has a database (the tests above need it); the other case is the message.
    assert_eq!(
        unknown_zone("Mars/Olympus"),
        ScheduleError::TimeZone("Mars/Olympus".into())
    );
    let missing = unknown_zone_given("Europe/Berlin", true).to_string();
    assert!(missing.contains("`Europe/Berlin`"), "{missing}");
    assert!(missing.contains("no time zone database"), "{missing}");
    assert!(missing.contains("tzdata"), "{missing}");
}

#[test]
fn at_takes_rfc3339_or_a_delay_and_runs_once() {
    let now = ms("2030-01-01T00:00:00Z");
    let s = Schedule::at("in 20m", now).unwrap();
    assert_eq!(
        s,
        Schedule::At {
            at_ms: now + 20 * 60_000
        }
    );
    assert_eq!(s.next_after(now).unwrap(), Some(now + 20 * 60_000));
    assert_eq!(s.next_after(now + 20 * 60_000).unwrap(), None);
    let s = Schedule::at("2030-01-31T09:00:00+01:00", now).unwrap();
    assert_eq!(
        s,
        Schedule::At {
            at_ms: ms("2030-01-31T08:00:00Z")
        }
    );
    assert!(Schedule::at("tomorrow-ish", now).is_err());
    assert!(s.is_one_shot());
}

#[test]
fn every_counts_from_its_anchor() {
    let s = Schedule::every("every 30m", 1_000).unwrap();
    assert_eq!(s.next_after(0).unwrap(), Some(1_000));
    assert_eq!(s.next_after(1_000).unwrap(), Some(1_000 + 1_800_000));
    assert_eq!(
        s.next_after(1_000 + 1_800_000 * 5 + 7).unwrap(),
        Some(1_000 + 1_800_000 * 6)
    );
    assert!(Schedule::every("500ms", 0).is_err());
    assert!(Schedule::every("soon", 0).is_err());
    assert_eq!(s.describe(), "every 30m");
}

#[test]
fn active_hours_hold_their_window_also_over_midnight() {
    let day = ActiveHours::parse("08:00-22:00", Some("Europe/Berlin")).unwrap();
    assert!(day.contains(ms("2025-06-01T06:00:00Z"))); // 08:00 CEST
    assert!(!day.contains(ms("2025-06-01T05:59:00Z")));
    assert!(!day.contains(ms("2025-06-01T20:00:00Z"))); // 22:00 CEST
    let night = ActiveHours::parse("22:00-06:00", Some("UTC")).unwrap();
    assert!(night.contains(ms("2025-06-01T23:00:00Z")));
    assert!(night.contains(ms("2025-06-01T05:00:00Z")));
    assert!(!night.contains(ms("2025-06-01T12:00:00Z")));
    assert!(ActiveHours::parse("8-22", None).is_err());
}
