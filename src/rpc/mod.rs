//! The gateway RPC: a WebSocket API (`ws://<rpc.listen>/ws`, JSON frames) to run turns and
//! watch the gateway from scripts and from the `chela` commands while a gateway holds the
//! store.
//!
//! - [`protocol`]: request, answer and event frames; error codes.
//! - [`methods`]: `agent`, `agent.wait`, `abort`, `sessions.list`, `status`.
//! - [`session_send`]: `sessions.send`, a text posted into a session's chat and transcript.
//! - `transcripts`: `sessions.show` (whole, or its `tail`: `transcript_tail`), `sessions.export`.
//! - [`cron`]: `cron.list`, `cron.add`, `cron.remove`, `cron.run` (`chela cron`).
//! - [`runs`]: the bounded tracker of finished runs behind `agent.wait`.
//! - [`channel`]: the `rpc` channel replies to RPC messages go to.
//! - [`server`]: the axum server, token check, connections.
//! - `pace`: wrong tokens answered one after the other, 0.3 s each (as the panel's logins).
//! - `ops`: `/metrics`, `/healthz`, `/readyz` on the same listener.
//! - `feed`: `events.subscribe`, live run events and finished runs pushed to a connection.
//! - [`discovery`]: `<store.path>.rpc`, where local commands find the RPC and its token.
//! - [`client`]: the client the `chela` commands use.
//! - [`panel`]: the web control panel at `/panel` on the same listener.
//! - [`backend`]: the [`api::GatewayApi`] over a running gateway's stages.
//! - [`status`]: what `chela status` and the `status` method report.
//! - [`cron_operator`]: the operator's jobs, through the RPC or on the store itself.

pub mod api;
pub mod backend;
pub mod channel;
pub mod client;
pub mod cron;
pub mod cron_operator;
pub mod discovery;
mod feed;
mod hosts;
pub mod methods;
mod ops;
mod pace;
mod pairing;
pub mod panel;
pub mod protocol;
pub mod runs;
pub mod server;
pub mod session_send;
pub mod status;
mod tokens;
mod transcript_tail;
mod transcripts;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use channel::RpcChannel;
pub use server::RpcServer;

/// Why the RPC could not start.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The address could not be bound.
    #[error(
        "rpc.listen: cannot listen on {address}: {source}; another gateway may be using it: set [rpc] listen to a free address, or \"\" to turn the RPC off"
    )]
    Bind {
        /// The configured address.
        address: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The discovery file could not be written.
    #[error("cannot write the RPC discovery file {}: {source}", path.display())]
    Discovery {
        /// Its path.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}
