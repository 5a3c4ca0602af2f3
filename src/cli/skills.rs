//! `chela skills list`: every skill found, its source, and whether it is loaded or why not.

use std::process::ExitCode;

use chela::agent::skills::{self, Source, Status};
use chela::config::LoadedConfig;
use clap::Subcommand;

/// What to do with skills.
#[derive(Subcommand)]
pub enum SkillsCommand {
    /// List every skill found (workspace, managed, bundled, extra folders), whether it is
    /// loaded and why not.
    List,
}

/// Runs a skills command.
pub async fn run(loaded: LoadedConfig, command: SkillsCommand) -> ExitCode {
    match command {
        SkillsCommand::List => list(&loaded),
    }
}

fn list(loaded: &LoadedConfig) -> ExitCode {
    let config = &loaded.config;
    let found = skills::discover_for(config);
    let width = found
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0);
    for f in &found {
        println!(
            "{:<width$}  {:<9}  {}",
            f.name,
            f.source.label(),
            f.status.describe()
        );
        println!("{:<width$}  {:<9}  {}", "", "", f.location);
    }
    let loaded_count = found.iter().filter(|f| f.status == Status::Loaded).count();
    if !found.is_empty() {
        println!();
    }
    println!(
        "{} skills found, {loaded_count} loaded, {} not loaded",
        found.len(),
        found.len() - loaded_count
    );
    let searched: Vec<String> = skills::Roots::from_config(&config.agent)
        .ordered()
        .into_iter()
        .map(|(source, dir)| match (source, dir) {
            (Source::Bundled, _) | (_, None) => "bundled".to_string(),
            (source, Some(dir)) => format!("{} ({source})", dir.display()),
        })
        .collect();
    println!(
        "searched, highest precedence first: {}",
        searched.join(", ")
    );
    ExitCode::SUCCESS
}
