//! Precedence, shadowing and status of discovered skills.

use std::path::Path;

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

const NULL: serde_json::Value = serde_json::Value::Null;

fn probe() -> Probe<'static> {
    Probe {
        path: None,
        env: &no_env,
        config: &NULL,
        os: "linux",
    }
}

fn skill(dir: &Path, folder: &str, front: &str) {
    let path = dir.join(folder);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("SKILL.md"), format!("---\n{front}\n---\nbody\n")).unwrap();
}

struct Tree {
    _dir: tempfile::TempDir,
    roots: Roots,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let roots = Roots {
        workspace: dir.path().join("ws"),
        managed: dir.path().join("managed"),
        extra: vec![dir.path().join("extra")],
    };
    Tree { _dir: dir, roots }
}

fn statuses(found: &[Found]) -> Vec<(String, Source, String)> {
    found
        .iter()
        .map(|f| (f.name.clone(), f.source, f.status.describe()))
        .collect()
}

#[test]
fn bundled_coding_agent_skill_loads() {
    let t = tree();
    let found = discover(&t.roots, &probe());
    let skills = loaded(&found);
    assert!(
        skills
            .iter()
            .any(|s| s.name == "coding-agent" && s.location == "bundled:coding-agent/SKILL.md")
    );
}

#[test]
fn higher_sources_shadow_lower_ones() {
    let t = tree();
    let ws = t.roots.workspace.join("skills");
    let managed = &t.roots.managed;
    let extra = &t.roots.extra[0];
    skill(&ws, "coding-agent", "name: coding-agent\ndescription: mine");
    skill(managed, "m", "name: shared\ndescription: from managed");
    skill(extra, "e", "name: shared\ndescription: from extra");
    skill(extra, "only", "name: only-extra\ndescription: extra");
    let found = discover(&t.roots, &probe());
    let ws_location = ws.join("coding-agent/SKILL.md").display().to_string();
    let managed_location = managed.join("m/SKILL.md").display().to_string();
    assert_eq!(
        statuses(&found),
        [
            ("coding-agent".into(), Source::Workspace, "loaded".into()),
            ("shared".into(), Source::Managed, "loaded".into()),
            (
                "coding-agent".into(),
                Source::Bundled,
                format!("not loaded: shadowed by workspace skill {ws_location}")
            ),
            (
                "shared".into(),
                Source::Extra,
                format!("not loaded: shadowed by managed skill {managed_location}")
            ),
            ("only-extra".into(), Source::Extra, "loaded".into()),
        ]
    );
    let skills = loaded(&found);
    let names: Vec<(&str, &str)> = skills
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("coding-agent", "mine"),
            ("shared", "from managed"),
            ("only-extra", "extra")
        ]
    );
}

#[test]
fn a_skill_with_unmet_requirements_still_shadows_and_says_why() {
    let t = tree();
    let ws = t.roots.workspace.join("skills");
    skill(
        &ws,
        "gh",
        "name: coding-agent\ndescription: d\nrequires:\n  bins: [gh]\n  env: [GITHUB_TOKEN]\n  os: [windows]",
    );
    let found = discover(&t.roots, &probe());
    assert_eq!(
        found[0].status,
        Status::Unmet(vec![
            "os windows only".into(),
            "missing binary: gh".into(),
            "env GITHUB_TOKEN not set".into()
        ])
    );
    assert!(matches!(
        found[1].status,
        Status::Shadowed {
            by: Source::Workspace,
            ..
        }
    ));
    assert!(loaded(&found).is_empty());
}

#[test]
fn the_first_of_two_folders_with_one_name_wins() {
    let t = tree();
    let extra = &t.roots.extra[0];
    skill(extra, "a", "name: twin\ndescription: first");
    skill(extra, "b", "name: twin\ndescription: second");
    let found = discover(&t.roots, &probe());
    let twins: Vec<&Found> = found.iter().filter(|f| f.name == "twin").collect();
    assert_eq!(twins[0].status, Status::Loaded);
    assert!(matches!(
        twins[1].status,
        Status::Shadowed {
            by: Source::Extra,
            ..
        }
    ));
}

#[test]
fn malformed_skills_are_listed_and_shadow_nothing() {
    let t = tree();
    let ws = t.roots.workspace.join("skills");
    skill(
        &ws,
        "coding-agent",
        "name: coding-agent\nrequires:\n  bogus: [x]",
    );
    std::fs::create_dir_all(ws.join("bare")).unwrap();
    std::fs::write(ws.join("bare/SKILL.md"), "# no front matter").unwrap();
    std::fs::create_dir_all(ws.join("binary")).unwrap();
    std::fs::write(ws.join("binary/SKILL.md"), [0xff, 0xfe, 0x00]).unwrap();
    let found = discover(&t.roots, &probe());
    let described = statuses(&found);
    assert_eq!(described[0].0, "bare");
    assert_eq!(
        described[0].2,
        "not loaded: malformed SKILL.md: no front matter: SKILL.md must start with a `---` line"
    );
    assert_eq!(described[1].0, "binary");
    assert!(described[1].2.contains("cannot read"), "{described:?}");
    assert_eq!(described[2].0, "coding-agent");
    assert_eq!(
        described[2].2,
        "not loaded: malformed SKILL.md: line 4: unknown requirement `bogus` (expected bins, env, config or os)"
    );
    assert_eq!(
        described[3],
        ("coding-agent".into(), Source::Bundled, "loaded".into())
    );
}

#[test]
fn config_roots_and_requirements_come_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.agent.workspace = dir.path().join("ws");
    config.agent.managed_skills_dir = dir.path().join("managed");
    config.agent.skills_dirs = vec![dir.path().join("extra")];
    config.channels.discord.token = "set".into();
    skill(
        &dir.path().join("managed"),
        "discord",
        "name: discord-only\ndescription: d\nrequires:\n  config:\n    - channels.discord.token",
    );
    skill(
        &dir.path().join("extra"),
        "telegram",
        "name: telegram-only\ndescription: d\nrequires:\n  config: [channels.telegram.token]",
    );
    let found = discover_for(&config);
    let described = statuses(&found);
    assert!(described.contains(&("discord-only".into(), Source::Managed, "loaded".into())));
    assert!(described.contains(&(
        "telegram-only".into(),
        Source::Extra,
        "not loaded: config channels.telegram.token not set".into()
    )));
    assert!(load(&config).iter().any(|s| s.name == "discord-only"));
}

#[test]
fn loaded_descriptions_are_one_line() {
    let t = tree();
    skill(
        &t.roots.extra[0],
        "multi",
        "name: multi\ndescription: |\n  first line\n  second   line",
    );
    let found = discover(&t.roots, &probe());
    let multi = found.iter().find(|f| f.name == "multi").unwrap();
    assert_eq!(multi.description, "first line\nsecond   line");
    let skills = loaded(&found);
    let multi = skills.iter().find(|s| s.name == "multi").unwrap();
    assert_eq!(multi.description, "first line second line");
}

#[test]
fn workspace_skills_linked_out_of_the_workspace_are_never_read() {
    let t = tree();
    let ws = &t.roots.workspace;
    let outside = t._dir.path().join("outside");
    // A SKILL.md-shaped secret outside the workspace, linked in three ways.
    skill(
        &outside,
        "secret",
        "name: leaked\ndescription: SECRET-TOKEN",
    );
    std::fs::create_dir_all(ws.join("skills/file-link")).unwrap();
    std::os::unix::fs::symlink(
        outside.join("secret/SKILL.md"),
        ws.join("skills/file-link/SKILL.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), ws.join("skills/folder-link")).unwrap();
    // A link that stays inside the workspace is followed.
    skill(ws, "kept", "name: kept\ndescription: inside");
    std::os::unix::fs::symlink(ws.join("kept"), ws.join("skills/inside-link")).unwrap();
    let found = discover(&t.roots, &probe());
    let from_ws: Vec<&Found> = found
        .iter()
        .filter(|f| f.source == Source::Workspace)
        .collect();
    assert!(
        found.iter().all(|f| !f.description.contains("SECRET")),
        "{found:?}"
    );
    let refused: Vec<&str> = from_ws
        .iter()
        .filter(|f| matches!(&f.status, Status::Malformed(e) if e.contains("leads outside the workspace")))
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(refused, ["file-link", "folder-link"], "{from_ws:?}");
    assert!(
        from_ws
            .iter()
            .any(|f| f.name == "kept" && f.status == Status::Loaded),
        "{from_ws:?}"
    );
    // A whole `skills` folder linked out of the workspace is not read either.
    std::fs::remove_dir_all(ws.join("skills")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("skills")).unwrap();
    let found = discover(&t.roots, &probe());
    assert!(
        found.iter().all(|f| f.source != Source::Workspace),
        "{found:?}"
    );
}
