//! The HTTP server loop every fake runs: TCP_NODELAY on each connection (small SSE and JSON
//! writes must not wait for delayed ACKs), graceful stop when the watch flag turns true.

use std::io;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Serves `app` on `listener` in a background task until `stopped` turns true (or its
/// sender is dropped).
pub(crate) fn spawn(
    listener: TcpListener,
    app: axum::Router,
    mut stopped: watch::Receiver<bool>,
) -> JoinHandle<io::Result<()>> {
    tokio::spawn(async move {
        axum::serve(
            listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            app,
        )
        .with_graceful_shutdown(async move {
            // Err: the sender is gone, which means stop as well.
            let _ = stopped.wait_for(|stop| *stop).await;
        })
        .await
    })
}
