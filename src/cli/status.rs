//! `chela status`: what the store holds (sessions, pending turns, undelivered replies, dead
//! letters). Reads the store directly, so it works while the gateway is stopped.

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::store::Store;

/// Prints the store's state.
pub async fn status(loaded: LoadedConfig) -> ExitCode {
    let store = match Store::open(&loaded.config.store.path) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    let report = || -> Result<(), chela::store::StoreError> {
        println!("store: {}", loaded.config.store.path.display());
        let channels = &loaded.config.channels;
        let mut names: Vec<&str> = Vec::new();
        if !channels.telegram.token.trim().is_empty() {
            names.push("telegram");
        }
        if !channels.discord.token.trim().is_empty() {
            names.push("discord");
        }
        if names.is_empty() {
            names.push("terminal (no platform token set)");
        }
        println!("channels: {}", names.join(", "));
        println!("sessions: {}", store.list_sessions()?.len());
        let pending = store.all_pending()?;
        println!("pending turns: {}", pending.len());
        for (seq, turn) in pending.iter().take(20) {
            println!("  #{seq} {}", turn.session_key);
        }
        println!("undelivered replies: {}", store.undelivered()?.len());
        let dead = store.dead_letters()?;
        println!("dead letters: {}", dead.len());
        for entry in dead.iter().take(20) {
            let preview: String = entry.text.chars().take(60).collect();
            println!("  #{} {} {:?}", entry.id, entry.session_key, preview);
        }
        Ok(())
    };
    match report() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}
