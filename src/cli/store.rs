//! `chela store migrate --to redb`: moves a sled store folder to redb (the gateway stopped).

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::store::StoreError;
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
}

/// Runs a `chela store` command.
pub fn run(loaded: LoadedConfig, command: StoreCommand) -> ExitCode {
    let StoreCommand::Migrate { to: _ } = command;
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
