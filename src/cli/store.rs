//! `chela store migrate --to redb`: moves a sled store folder to redb (the gateway stopped);
//! `chela store check`: checks the configured store and says what to do when it is damaged.

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::store::{Store, StoreError, holds_redb, holds_sled};
use clap::Subcommand;

/// `chela store ...`.
#[derive(Subcommand)]
pub enum StoreCommand {
    /// Copy every record of the sled store in store.path into a new redb store, check the
    /// counts, and keep the sled folder as <store.path>.sled-backup. Stop the gateway first.
    Migrate {
        /// The engine to move to (only redb).
        #[arg(long, value_parser = ["redb"])]
        to: String,
    },
    /// Check the store in store.path (or at store.url): redb verifies the checksum of every
    /// page, and every record of every table is read. Prints ok (exit 0), or the damage and
    /// what to do (exit 2). Stop the gateway first.
    Check,
}

/// Runs a `chela store` command.
pub fn run(loaded: LoadedConfig, command: StoreCommand) -> ExitCode {
    match command {
        StoreCommand::Migrate { to: _ } => migrate(&loaded),
        StoreCommand::Check => check(&loaded),
    }
}

/// `chela store check`.
fn check(loaded: &LoadedConfig) -> ExitCode {
    let config = &loaded.config.store;
    let place = match config.is_postgres() {
        true => format!("the PostgreSQL store ({})", config.url_setting()),
        false if !holds_redb(&config.path) && !holds_sled(&config.path) => {
            println!(
                "no store in {} yet: nothing to check",
                config.path.display()
            );
            return ExitCode::SUCCESS;
        }
        false => format!("the store in {}", config.path.display()),
    };
    let checked = Store::open_config(&loaded.config).and_then(|store| {
        let counts = store.walk()?;
        Ok((store.engine(), counts))
    });
    match checked {
        Ok((engine, counts)) => {
            println!("ok: {place} ({engine}) is sound");
            for (table, records) in counts.iter().filter(|(_, n)| *n > 0) {
                println!("  {table}: {records} records");
            }
            if engine == "postgresql" {
                println!(
                    "  (it answers; PostgreSQL checks its own pages: use its tools, such as pg_amcheck, for more)"
                );
            }
            ExitCode::SUCCESS
        }
        Err(e @ StoreError::Locked { .. }) => {
            eprintln!("chela: {e}; stop the gateway first (the check opens the store)");
            ExitCode::FAILURE
        }
        Err(e @ StoreError::NotBuilt { .. }) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::from(2)
        }
    }
}

/// `chela store migrate --to redb`.
fn migrate(loaded: &LoadedConfig) -> ExitCode {
    let store = &loaded.config.store;
    if store.is_postgres() {
        eprintln!(
            "chela: the store is on PostgreSQL ({}); migrate moves an embedded sled store",
            store.url_setting()
        );
        return ExitCode::from(2);
    }
    match chela::store::migrate::sled_to_redb(&store.path, store.cache_bytes()) {
        Ok(done) => {
            println!("moved {} to redb:", store.path.display());
            for (table, records) in &done.tables {
                println!("  {table}: {records} records");
            }
            println!("the sled store is kept in {}", done.backup.display());
            if store.engine == chela::config::StoreEngine::Sled {
                println!(
                    "{} = sled still names the old engine: set it to redb or remove it",
                    store.engine_setting()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e @ StoreError::Locked { .. }) => {
            eprintln!("chela: {e}; stop the gateway first");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}
