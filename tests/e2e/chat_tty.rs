//! End-to-end: `chela chat` on a real terminal (a PTY): the banner and prompt, arrow keys
//! editing the line (never reaching the model as escape codes), history recalled with Up and
//! kept in `<store>.history` (mode 0600), a bracketed paste sent as one message, and Ctrl-D
//! leaving with status 0; `chela gateway` with no platform token chatting on the terminal.

use crate::common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Setup, text_of};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// How long one expected output may take.
const WAIT: Duration = Duration::from_secs(30);

/// What the terminal showed so far, as bytes (a read may end inside a character).
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Screen {
    /// The output so far as text.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Waits until the output holds `needle` `times` times; fails the test after [`WAIT`].
    fn wait_for(&self, needle: &str, times: usize) {
        let start = Instant::now();
        while self.text().matches(needle).count() < times {
            assert!(
                start.elapsed() < WAIT,
                "{needle:?} not shown {times} time(s); the terminal showed: {:?}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The user texts the model was sent, one per call (the last user message of each).
fn user_texts(setup: &Setup) -> Vec<String> {
    setup
        .model_calls()
        .iter()
        .map(|body| {
            let messages = body["messages"].as_array().unwrap();
            let last_user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
            text_of(last_user)
        })
        .collect()
}

/// `chela <args>` running on a PTY: the child, what it shows, and its keyboard.
struct OnPty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    screen: Screen,
    keys: Box<dyn Write + Send>,
}

impl OnPty {
    /// Starts `chela --config <setup's> <args>` on a new PTY with a clean environment and
    /// `RUST_LOG` `log`.
    fn start(setup: &Setup, args: &[&str], log: &str) -> OnPty {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_chela"));
        cmd.args(["--config", setup.config().to_str().unwrap()]);
        cmd.args(args);
        cmd.env_clear();
        for (name, value) in [
            ("HOME", setup.dir.path().to_str().unwrap()),
            ("USER", "tester"),
            ("TERM", "xterm"),
            ("RUST_LOG", log),
            ("CHELA_RPC_LISTEN", "127.0.0.1:0"),
        ] {
            cmd.env(name, value);
        }
        cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        cmd.cwd(setup.dir.path());
        let child = pty.slave.spawn_command(cmd).unwrap();
        drop(pty.slave);
        let screen = Screen::default();
        let mut reader = pty.master.try_clone_reader().unwrap();
        let shown = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                shown.0.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let keys = pty.master.take_writer().unwrap();
        OnPty {
            child,
            screen,
            keys,
        }
    }

    /// Types `bytes`.
    fn press(&mut self, bytes: &str) {
        self.keys.write_all(bytes.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    /// Waits for the process to end (failing the test after [`WAIT`]); its exit status.
    async fn ended(&mut self, what: &str) -> portable_pty::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > WAIT {
                self.child.kill().unwrap();
                panic!("{what} did not end it: {:?}", self.screen.text());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_chat_edits_lines_recalls_history_and_pastes_whole() {
    let setup = Setup::openai("followup").await;
    let mut pty = OnPty::start(&setup, &["chat"], "warn");
    let screen = pty.screen.clone();
    let mut press = |bytes: &str| pty.press(bytes);

    screen.wait_for("chela chat · openai/", 1);
    screen.wait_for("Ctrl-D leaves", 1);
    // A typo fixed with the arrow keys: three Lefts, then the missing letter.
    press("hllo");
    press("\x1b[D\x1b[D\x1b[D");
    press("e\r");
    screen.wait_for("ok: hello", 1);
    // Up recalls the line just sent.
    press("\x1b[A\r");
    screen.wait_for("ok: hello", 2);
    // A bracketed paste of two lines is one message.
    press("\x1b[200~first line\nsecond line\x1b[201~\r");
    screen.wait_for("ok: first line", 1);
    press("\x04");
    let status = pty.ended("Ctrl-D").await;
    assert!(status.success(), "{status:?}: {:?}", screen.text());

    assert_eq!(
        user_texts(&setup),
        ["hello", "hello", "first line\nsecond line"],
        "what the model was sent"
    );
    let history = setup.path("data.history");
    let kept = std::fs::read_to_string(&history).unwrap();
    assert!(kept.contains("hello"), "{kept:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&history).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "history mode {mode:o}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_a_platform_token_chats_on_the_terminal_and_ctrl_d_stops_it() {
    let setup = Setup::openai("followup").await;
    let mut pty = OnPty::start(&setup, &["gateway"], "info");
    pty.screen.wait_for("chela gateway · openai/", 1);
    pty.screen.wait_for("Ctrl-D or Ctrl-C stops the gateway", 1);
    pty.press("hello there\r");
    pty.screen.wait_for("ok: hello there", 1);
    pty.press("\x04");
    let status = pty.ended("Ctrl-D").await;
    assert!(status.success(), "{status:?}: {:?}", pty.screen.text());
    // Its log went to the log file, not into the chat.
    assert!(
        !pty.screen.text().contains("chela ready"),
        "{:?}",
        pty.screen.text()
    );
    let log = std::fs::read_to_string(setup.path("data.log")).unwrap();
    assert!(log.contains("chela ready"), "{log}");
}
