//! DevTools over a pipe instead of a port: Chromium runs with `--remote-debugging-pipe`
//! (commands on its fd 3, answers on its fd 4, each message ended by a NUL byte), so it
//! listens on nothing a local process could drive. chromiumoxide speaks WebSocket only, so
//! chela bridges: a WebSocket server on 127.0.0.1 that takes one client at a time, only on
//! a random path nobody else knows, and relays its messages to the pipe and back.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_util::sync::{CancellationToken, DropGuard};

/// Largest DevTools message relayed (a full-page screenshot is the biggest).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// The shell line that gives the program the pipe on fds 3 and 4 (from its stdin and
/// stdout) and /dev/null as stdin and stdout, then becomes it: `sh -c LINE program args…`.
pub const FDS_FROM_STDIO: &str = "exec 3<&0 4>&1 0</dev/null 1>/dev/null; exec \"$0\" \"$@\"";

/// A running bridge; dropping it stops it.
pub struct Bridge {
    url: String,
    _stop: DropGuard,
}

impl Bridge {
    /// Bridges Chromium's pipe (`to_chromium` is its fd 3, `from_chromium` its fd 4).
    pub async fn start(
        to_chromium: ChildStdin,
        from_chromium: ChildStdout,
    ) -> std::io::Result<Bridge> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let secret = uuid::Uuid::new_v4().simple().to_string();
        let url = format!("ws://{}/devtools/browser/{secret}", listener.local_addr()?);
        let stop = CancellationToken::new();
        let pipe = Pipe {
            to: Arc::new(Mutex::new(to_chromium)),
            from: Arc::new(Mutex::new(BufReader::new(from_chromium))),
        };
        tokio::spawn(serve(
            listener,
            format!("/devtools/browser/{secret}"),
            pipe,
            stop.clone(),
        ));
        Ok(Bridge {
            url,
            _stop: stop.drop_guard(),
        })
    }

    /// The WebSocket URL chromiumoxide connects to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

#[derive(Clone)]
struct Pipe {
    to: Arc<Mutex<ChildStdin>>,
    from: Arc<Mutex<BufReader<ChildStdout>>>,
}

async fn serve(listener: TcpListener, path: String, pipe: Pipe, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        let check = PathCheck { path: &path };
        let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
            continue;
        };
        // One client at a time: the next waits until this one is gone.
        tokio::select! {
            () = stop.cancelled() => return,
            () = relay(socket, pipe.clone()) => {}
        }
    }
}

/// The handshake's check: only the secret path is served (404 otherwise).
struct PathCheck<'a> {
    path: &'a str,
}

impl tokio_tungstenite::tungstenite::handshake::server::Callback for PathCheck<'_> {
    fn on_request(self, request: &Request, response: Response) -> Result<Response, ErrorResponse> {
        if request.uri().path() == self.path {
            return Ok(response);
        }
        let mut refused = ErrorResponse::new(None);
        *refused.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::NOT_FOUND;
        Err(refused)
    }
}

/// Messages both ways until either side ends.
async fn relay(socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, pipe: Pipe) {
    let (mut out, mut incoming) = socket.split();
    let to_chromium = async {
        while let Some(Ok(message)) = incoming.next().await {
            let bytes = match message {
                Message::Text(text) => text.into_bytes(),
                Message::Binary(bytes) => bytes,
                Message::Close(_) => return,
                _ => continue,
            };
            let mut to = pipe.to.lock().await;
            if to.write_all(&bytes).await.is_err() || to.write_all(b"\0").await.is_err() {
                return;
            }
        }
    };
    let from_chromium = async {
        let mut from = pipe.from.lock().await;
        loop {
            let mut message = Vec::new();
            match (&mut *from)
                .take(MAX_MESSAGE as u64)
                .read_until(0, &mut message)
                .await
            {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if message.last() != Some(&0) {
                tracing::warn!("a DevTools message too large or cut; the browser connection ends");
                return;
            }
            message.pop();
            let text = String::from_utf8_lossy(&message).into_owned();
            if out.send(Message::Text(text)).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = to_chromium => {}
        () = from_chromium => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_cross_the_pipe_only_on_the_secret_path() {
        // `cat` plays Chromium: what it reads on its stdin comes back on its stdout.
        let mut child = tokio::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let bridge = Bridge::start(child.stdin.take().unwrap(), child.stdout.take().unwrap())
            .await
            .unwrap();
        let wrong = bridge.url().rsplit_once('/').unwrap().0.to_string() + "/guess";
        assert!(
            tokio_tungstenite::connect_async(wrong).await.is_err(),
            "a wrong path is refused"
        );
        let (mut socket, _) = tokio_tungstenite::connect_async(bridge.url())
            .await
            .unwrap();
        socket
            .send(Message::Text("{\"id\":1}".into()))
            .await
            .unwrap();
        let back = socket.next().await.unwrap().unwrap();
        assert_eq!(back, Message::Text("{\"id\":1}".into()));
    }
}
