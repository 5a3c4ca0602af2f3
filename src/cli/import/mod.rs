//! `chela import openclaw [DIR]`: moving over from an OpenClaw state folder (config,
//! transcripts, pairing approvals). Nothing it cannot carry over is dropped silently: the
//! summary lists it.

mod agents;
mod config;
mod files;
mod merge;
mod state;
mod values;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chela::config::{Config, LoadedConfig};
use chela::domain::message::now_ms;
use chela::domain::session_key::SessionKey;
use chela::store::foreign;
use chela::store::{PairingOutcome, Store, StoreError};
use clap::Subcommand;

/// What to import.
#[derive(Subcommand)]
pub enum ImportCommand {
    /// An OpenClaw state folder: config, session transcripts, pairing approvals.
    Openclaw {
        /// The folder (default: ~/.openclaw).
        dir: Option<PathBuf>,
        /// Write the imported settings into an existing chela config file that differs
        /// (every setting the import does not write, such as [store] and [rpc], is kept; the
        /// old file is kept beside it as <file>.before-import).
        #[arg(long)]
        force: bool,
    },
}

/// Runs an import.
pub async fn run(
    loaded: LoadedConfig,
    explicit: Option<&Path>,
    command: ImportCommand,
) -> ExitCode {
    let ImportCommand::Openclaw { dir, force } = command;
    let dir = dir.unwrap_or_else(|| dirs::home_dir().unwrap_or_default().join(".openclaw"));
    if !dir.is_dir() {
        eprintln!("chela: {} is not a folder", dir.display());
        return ExitCode::from(2);
    }
    // A running gateway holds the store: refuse before anything is written. The imported
    // config leaves `[store]` as it is (`merge.rs`), so this is the store the import writes to.
    if let Err(e @ StoreError::Locked { .. }) = Store::open_config(&loaded.config) {
        eprintln!("chela: {e}; stop the gateway first (the import writes to the store)");
        return ExitCode::from(2);
    }
    // Everything is read (and a crafted folder refused) before anything is written.
    let (sessions, approvals) = match read_state(&dir) {
        Ok(read) => read,
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    let mut not_carried: Vec<String> = Vec::new();
    let target = explicit
        .map(Path::to_path_buf)
        .or(loaded.source.clone())
        // Where a later `chela` looks by default (docs/configuration.md), not beside the store.
        .or_else(chela::config::default_config_path)
        .unwrap_or_else(|| loaded.base_dir.join("config.toml"));
    let loaded = match write_config(&dir, &target, force, &mut not_carried) {
        Ok(true) => match Config::load(Some(&target)) {
            Ok(reloaded) => reloaded,
            Err(e) => {
                eprintln!("chela: the written config does not load: {e}");
                return ExitCode::FAILURE;
            }
        },
        Ok(false) => loaded,
        Err(message) => {
            eprintln!("chela: {message}");
            return ExitCode::from(2);
        }
    };
    let store = match open_store(&loaded) {
        Ok(store) => store,
        Err(code) => return code,
    };
    // Beside the store (`~/.chela` by default), not in the config folder.
    let data_dir = loaded
        .config
        .store
        .path
        .parent()
        .unwrap_or(&loaded.base_dir);
    let keep_dir = data_dir.join("imported").join("openclaw");
    let imported = import_sessions(
        &store,
        sessions,
        &loaded.config.agent.id,
        &keep_dir,
        &mut not_carried,
    );
    let paired = import_pairing(&store, approvals, &loaded, &mut not_carried).await;
    let flushed = store.flush().await;
    let (sessions, entries) = match imported.and_then(|s| paired.map(|p| (s, p))) {
        Ok(((sessions, entries), paired)) => {
            println!("paired senders carried over: {paired}");
            (sessions, entries)
        }
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("sessions imported: {sessions}, entries: {entries}");
    if not_carried.is_empty() {
        println!("everything was carried over");
    } else {
        println!("not carried over:");
        for line in &not_carried {
            println!("  - {line}");
        }
    }
    match flushed {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The sessions and the pairing approvals of OpenClaw's folder `dir`.
fn read_state(
    dir: &Path,
) -> Result<(Vec<state::ForeignSession>, Vec<state::Approval>), state::StateError> {
    Ok((state::sessions(dir)?, state::approvals(dir)?))
}

/// The store the import writes to; a message and exit code 2 when it cannot be opened.
fn open_store(loaded: &LoadedConfig) -> Result<Store, ExitCode> {
    Store::open_config(&loaded.config).map_err(|e| {
        match e {
            StoreError::Locked { .. } => {
                eprintln!("chela: {e}; stop the gateway first (the import writes to the store)")
            }
            e => eprintln!("chela: {e}"),
        }
        ExitCode::from(2)
    })
}

/// Writes the mapped config to `target`, laid over the config already there (see
/// `merge.rs`); when that changes an existing file, a diff is printed and, without `force`,
/// nothing is written. True when it was written.
fn write_config(
    dir: &Path,
    target: &Path,
    force: bool,
    not_carried: &mut Vec<String>,
) -> Result<bool, String> {
    let source = dir.join("openclaw.json");
    let Some(text) = files::read_text(&source, files::JSON_LIMIT).map_err(|e| e.to_string())?
    else {
        not_carried.push(format!("config: no {}", source.display()));
        return Ok(false);
    };
    let openclaw: serde_json::Value =
        json5::from_str(&text).map_err(|e| format!("{}: {e}", source.display()))?;
    let mapped = config::map(&openclaw, dir);
    not_carried.extend(mapped.not_carried);
    let existing = std::fs::read_to_string(target).ok();
    let Some(existing) = existing else {
        print!("{}", diff("", &mapped.toml));
        return write_file(target, &mapped.toml).map(|()| true);
    };
    let Some(merged) = merged(&existing, &mapped.toml, target)? else {
        println!(
            "config: {} already holds the imported settings",
            target.display()
        );
        return Ok(false);
    };
    println!(
        "config: {} differs from the imported one:",
        target.display()
    );
    print!("{}", diff(&existing, &merged));
    if !force {
        println!(
            "config: left as it is (--force writes the imported settings into it, keeping the others)"
        );
        return Ok(false);
    }
    let mut kept = target.as_os_str().to_owned();
    kept.push(".before-import");
    std::fs::write(&kept, &existing).map_err(|e| format!("{}: {e}", Path::new(&kept).display()))?;
    write_file(target, &merged)?;
    println!(
        "config: the previous one is kept in {}",
        Path::new(&kept).display()
    );
    Ok(true)
}

/// The imported settings (TOML text) laid over the `existing` config of `target`; `None`
/// when that changes no setting.
fn merged(existing: &str, imported: &str, target: &Path) -> Result<Option<String>, String> {
    let old: toml::Table = toml::from_str(existing).map_err(|e| {
        format!(
            "{} is not a config chela reads ({e}): fix it or move it away, then import again",
            target.display()
        )
    })?;
    let new: toml::Table = toml::from_str(imported).map_err(|e| e.to_string())?;
    let merged = merge::merge(old.clone(), new);
    if merged == old {
        return Ok(None);
    }
    let text = toml::to_string(&merged).map_err(|e| e.to_string())?;
    Ok(Some(format!(
        "# Written by `chela import openclaw` from OpenClaw's openclaw.json, over the config that was here.\n{text}"
    )))
}

/// Writes config `text` to `target`, making its folder if needed.
fn write_file(target: &Path, text: &str) -> Result<(), String> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    // It holds bot tokens and keys: readable by this user alone.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(target)
        .map_err(|e| format!("{}: {e}", target.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", target.display()))?;
    println!("config: wrote {}", target.display());
    Ok(())
}

/// A line diff (`-` old, `+` new, ` ` both) by longest common subsequence.
fn diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}

/// Imports every session transcript; returns (sessions, entries).
/// A transcript with entries chela could not hold is also kept whole, as OpenClaw wrote it,
/// in `keep_dir/<key>.jsonl`.
fn import_sessions(
    store: &Store,
    sessions: Vec<state::ForeignSession>,
    agent_id: &str,
    keep_dir: &Path,
    not_carried: &mut Vec<String>,
) -> Result<(usize, usize), StoreError> {
    let mut totals = (0, 0);
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut kept = None;
    for session in sessions {
        let key = chela_key(&session.key, agent_id);
        if key != session.key {
            println!("session {} -> {key}", session.key);
        }
        if session.unreadable > 0 {
            *skipped
                .entry("unreadable transcript row".into())
                .or_default() += session.unreadable;
        }
        let original: String = session.lines.iter().map(|v| format!("{v}\n")).collect();
        let converted = match foreign::convert_values(session.lines) {
            Ok(converted) => converted,
            Err(e) => {
                not_carried.push(format!("session {} ({}): {e}", session.key, session.origin));
                continue;
            }
        };
        for (kind, n) in &converted.not_carried {
            *skipped.entry(kind.clone()).or_default() += n;
        }
        if !converted.not_carried.is_empty() {
            let file = keep_dir.join(format!("{}.jsonl", key.replace(':', "_")));
            std::fs::create_dir_all(keep_dir)
                .and_then(|()| std::fs::write(&file, &original))
                .map_err(StoreError::from)?;
            kept = Some(keep_dir);
        }
        let jsonl = converted
            .to_jsonl()
            .map_err(|e| StoreError::Encode(e.to_string()))?;
        match store.import(&key, &jsonl[..]) {
            Ok(n) => totals = (totals.0 + 1, totals.1 + n),
            Err(e @ StoreError::SessionExists { .. }) => {
                not_carried.push(format!("session {}: {e}", session.key));
            }
            Err(e) => return Err(e),
        }
    }
    not_carried.extend(skipped.into_iter().map(|(kind, n)| format!("{n} × {kind}")));
    if let Some(kept) = kept {
        println!(
            "whole transcripts, with what chela cannot hold, kept in {}",
            kept.display()
        );
    }
    Ok(totals)
}

/// The chela session key for OpenClaw's `key`: the same when chela's grammar reads it, else a
/// terminal DM of the agent named after it (`agent:<a>:terminal:direct:<rest>`).
fn chela_key(key: &str, agent_id: &str) -> String {
    if let Ok(parsed) = SessionKey::parse(key) {
        return parsed.to_string();
    }
    let mut parts = key.splitn(3, ':');
    let (agent, rest) = match (parts.next(), parts.next(), parts.next()) {
        (Some("agent"), Some(agent), Some(rest)) => (agent, rest),
        _ => (agent_id, key),
    };
    let peer: String = rest
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let candidate = format!("agent:{agent}:terminal:direct:{peer}");
    SessionKey::parse(&candidate)
        .map(|k| k.to_string())
        .unwrap_or_else(|_| format!("agent:{agent_id}:terminal:direct:{peer}"))
}

/// Approves every paired sender on Telegram and Discord; returns how many.
async fn import_pairing(
    store: &Store,
    approvals: Vec<state::Approval>,
    loaded: &LoadedConfig,
    not_carried: &mut Vec<String>,
) -> Result<usize, StoreError> {
    let mut paired = 0;
    for (channel, account, sender) in approvals {
        let chela_account = match loaded.config.channels.account(&channel) {
            Some(account) => account,
            None => {
                not_carried.push(format!(
                    "pairing {channel}:{sender}: chela has no {channel} channel"
                ));
                continue;
            }
        };
        if account != "default" && account != chela_account {
            not_carried.push(format!(
                "pairing {channel}:{sender} of account {account}: chela runs one {channel} bot"
            ));
            continue;
        }
        let now = now_ms();
        let code = match store.request_pairing(&channel, chela_account, &sender, &sender, now)? {
            PairingOutcome::New(code) | PairingOutcome::Existing(code) => code,
            PairingOutcome::TooMany { .. } => {
                not_carried.push(format!(
                    "pairing {channel}:{sender}: too many pending codes"
                ));
                continue;
            }
        };
        if store
            .approve_pairing(&channel, &code, now, false)
            .await?
            .is_some()
        {
            paired += 1;
        }
    }
    Ok(paired)
}
