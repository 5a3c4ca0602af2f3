//! End-to-end: `chela skills list` shows every skill with its source and status, and the
//! system prompt the model receives lists exactly the loaded skills.

use crate::common;

use std::path::Path;

use common::Setup;

fn skill(dir: &Path, folder: &str, front: &str) {
    let path = dir.join(folder);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(
        path.join("SKILL.md"),
        format!("---\n{front}\n---\n# {folder}\n"),
    )
    .unwrap();
}

/// The listing line of `name` (the line after it is its location).
fn line_of<'a>(stdout: &'a str, name: &str, source: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| {
            let mut words = l.split_whitespace();
            words.next() == Some(name) && words.next() == Some(source)
        })
        .unwrap_or_else(|| panic!("no {source} skill {name} in:\n{stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_and_the_system_prompt_agree() {
    let setup = Setup::openai("steer").await;
    let workspace = setup.path("ws/skills");
    let os = std::env::consts::OS;
    skill(
        &workspace,
        "shell-helper",
        &format!(
            "name: shell-helper\ndescription: Runs shell one-liners.\nrequires:\n  bins: [sh]\n  os: [{os}]"
        ),
    );
    skill(
        &workspace,
        "gh-helper",
        "name: gh-helper\ndescription: Talks to GitHub.\nrequires:\n  bins:\n    - chela-e2e-no-such-binary",
    );
    skill(
        &workspace,
        "token-helper",
        "name: token-helper\ndescription: Needs a token.\nrequires:\n  env: [CHELA_E2E_SKILL_TOKEN]\n  config: [channels.telegram.token]",
    );
    skill(&workspace, "broken", "name: broken\nrequires: nope");
    // The managed folder defaults to ~/.chela/skills (HOME is the temp dir).
    let managed = setup.path(".chela/skills");
    skill(
        &managed,
        "shell-helper",
        "name: shell-helper\ndescription: The managed copy.",
    );
    skill(
        &managed,
        "managed-only",
        "name: managed-only\ndescription: Installed for every workspace.",
    );

    let out = setup.run(&["skills", "list"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(line_of(&stdout, "shell-helper", "workspace").ends_with("  loaded"));
    assert!(
        line_of(&stdout, "gh-helper", "workspace")
            .ends_with("not loaded: missing binary: chela-e2e-no-such-binary"),
        "{stdout}"
    );
    assert!(
        line_of(&stdout, "token-helper", "workspace").ends_with(
            "not loaded: env CHELA_E2E_SKILL_TOKEN not set; config channels.telegram.token not set"
        ),
        "{stdout}"
    );
    assert!(
        line_of(&stdout, "broken", "workspace").contains("not loaded: malformed SKILL.md: line 3:"),
        "{stdout}"
    );
    assert!(
        line_of(&stdout, "shell-helper", "managed")
            .contains("not loaded: shadowed by workspace skill "),
        "{stdout}"
    );
    assert!(line_of(&stdout, "managed-only", "managed").ends_with("  loaded"));
    assert!(line_of(&stdout, "coding-agent", "bundled").ends_with("  loaded"));
    assert!(
        stdout.contains(&format!(
            "{}",
            workspace.join("gh-helper").join("SKILL.md").display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("7 skills found, 3 loaded, 4 not loaded"),
        "{stdout}"
    );

    let (status, json) = setup.agent_json("hello").await;
    assert!(status.success(), "{json}");
    let calls = setup.model_calls();
    let system = calls[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("## Skills"), "{system}");
    assert!(system.contains("- shell-helper ("), "{system}");
    assert!(system.contains("Runs shell one-liners."), "{system}");
    assert!(system.contains("- managed-only ("), "{system}");
    assert!(system.contains("- coding-agent (bundled:"), "{system}");
    for left_out in ["gh-helper", "token-helper", "broken", "The managed copy."] {
        assert!(!system.contains(left_out), "{left_out} in {system}");
    }
}
