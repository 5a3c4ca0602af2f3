//! End-to-end: `chela chat` on a real terminal (a PTY): the banner and prompt, arrow keys
//! editing the line (never reaching the model as escape codes), history recalled with Up and
//! kept in `<store>.history` (mode 0600), a bracketed paste sent as one message, and Ctrl-D
//! leaving with status 0; replies streamed as they come with a spinner while waiting,
//! markdown rendered in colour (none with `NO_COLOR`), tool lines with an excerpt, `/usage`;
//! `chela gateway` with no platform token chatting on the terminal, and `chela chat` beside
//! it through its RPC.

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
    /// The terminal's side, to read its settings.
    master: Box<dyn portable_pty::MasterPty + Send>,
}

impl OnPty {
    /// Starts `chela --config <setup's> <args>` on a new PTY with a clean environment and
    /// `RUST_LOG` `log`.
    fn start(setup: &Setup, args: &[&str], log: &str) -> OnPty {
        OnPty::start_with(setup, args, log, &[])
    }

    /// As [`OnPty::start`], with the variables `env` set too.
    fn start_with(setup: &Setup, args: &[&str], log: &str, env: &[(&str, &str)]) -> OnPty {
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
        for (name, value) in env {
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
            master: pty.master,
        }
    }

    /// Types `bytes`.
    fn press(&mut self, bytes: &str) {
        self.keys.write_all(bytes.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    /// Whether the terminal is back to lines typed with echo (not the editor's raw mode).
    fn cooked(&self) -> bool {
        let modes = format!("{:?}", self.master.get_termios());
        modes.contains("ICANON") && modes.contains("ISIG")
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
    // Up recalls the line just sent (a reply shows while it streams and again once whole:
    // another word makes the second one's own).
    press("\x1b[A again\r");
    screen.wait_for("ok: hello again", 1);
    // A bracketed paste of two lines is one message.
    press("\x1b[200~first line\nsecond line\x1b[201~\r");
    screen.wait_for("ok: first line", 1);
    press("\x04");
    let status = pty.ended("Ctrl-D").await;
    assert!(status.success(), "{status:?}: {:?}", screen.text());

    assert_eq!(
        user_texts(&setup),
        ["hello", "hello again", "first line\nsecond line"],
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
    assert!(pty.cooked(), "the terminal's settings were put back");

    // Ctrl-C at its prompt stops it too.
    let mut pty = OnPty::start(&setup, &["gateway"], "info");
    pty.screen.wait_for("Ctrl-D or Ctrl-C stops the gateway", 1);
    let start = Instant::now();
    while pty.cooked() {
        assert!(start.elapsed() < WAIT, "the editor never read in raw mode");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pty.press("\x03");
    let status = pty.ended("Ctrl-C").await;
    assert!(status.success(), "{status:?}: {:?}", pty.screen.text());
    assert!(pty.cooked(), "the terminal's settings were put back");
}

/// `text` without its colour and style escape sequences.
fn unstyled(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let params = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(after.len());
        rest = match after[params..].strip_prefix('m') {
            Some(tail) => tail,
            None => {
                out.push_str("\x1b[");
                after
            }
        };
    }
    out.push_str(rest);
    out
}

/// Whether `text` holds a colour or style escape sequence (`ESC [ digits;... m`).
fn has_style(text: &str) -> bool {
    text.match_indices("\x1b[").any(|(i, _)| {
        let rest = &text[i + 2..];
        let params = rest
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(rest.len());
        rest[params..].starts_with('m')
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_chat_streams_renders_markdown_and_shows_a_spinner_tools_and_usage() {
    let setup = Setup::openai("followup").await;
    let mut pty = OnPty::start(&setup, &["chat"], "warn");
    let screen = pty.screen.clone();
    screen.wait_for("Ctrl-D leaves", 1);

    // A model that takes its time: a spinner with the time waited.
    pty.press("after 1500 slow one\r");
    screen.wait_for(" thinking 0.", 1);
    screen.wait_for("ok: slow one", 1);
    // Streamed as it comes: the first delta shows while its line is still open (the model
    // then stalls, until Ctrl-C stops the reply).
    pty.press("stall\r");
    screen.wait_for("thinking...", 1);
    pty.press("\x03");
    screen.wait_for("[stopping; Ctrl-C again to exit]", 1);
    screen.wait_for("[stopped]", 1);
    // Markdown rendered: no marks, bullets, a drawn table, bold and highlighted code.
    pty.press("markdown 5\r");
    screen.wait_for("Done.", 1);
    let styled = screen.text();
    let shown = unstyled(&styled);
    assert!(
        shown.contains("\x1b[JPlan\r\n"),
        "the heading without its marks, where the live line was cleared: {shown:?}"
    );
    assert!(
        shown.contains("• first") && shown.contains("• second"),
        "{shown:?}"
    );
    assert!(shown.contains("┌───────┬───┐"), "{shown:?}");
    assert!(shown.contains("│ alpha │ 1 │"), "{shown:?}");
    assert!(styled.contains("\x1b[1mbold"), "{styled:?}");
    assert!(
        styled.contains("\x1b[38;2;"),
        "code highlighted: {styled:?}"
    );
    // As a terminal draws it: each line once, the spinner gone.
    let lines = drawn(&pty.screen.0.lock().unwrap(), 30, 200);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    for once in [
        "> markdown 5",
        "Plan",
        "• first",
        "│ alpha │ 1 │",
        "fn main()",
        "Done.",
    ] {
        assert_eq!(count(once), 1, "{once:?} once: {lines:#?}");
    }
    let spinner = |l: &&String| l.contains(['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']);
    assert_eq!(lines.iter().filter(spinner).count(), 0, "{lines:#?}");
    assert_eq!(count("**"), 0, "no raw markdown left: {lines:#?}");
    // A tool call's line says what it runs.
    pty.press("run echo hi\r");
    screen.wait_for("🔧 exec  echo hi", 1);
    screen.wait_for("done: ", 1);
    // /usage on is the screen's own: each turn's tokens from then on.
    pty.press("/usage on\r");
    screen.wait_for("usage: each turn's tokens are shown", 1);
    pty.press("hello\r");
    screen.wait_for(" out · context ", 1);
    // gpt-4.1-mini has a built-in price: the line ends with the turn's cost.
    screen.wait_for("%) · $0.", 1);
    // Alone, /usage is the gateway's: the session's tokens and cost.
    pty.press("/usage\r");
    screen.wait_for("Session: ", 1);
    screen.wait_for("Prices of ", 1);
    pty.press("\x04");
    let status = pty.ended("Ctrl-D").await;
    assert!(status.success(), "{status:?}: {:?}", screen.text());
    let sent = user_texts(&setup);
    assert!(sent.iter().any(|t| t == "hello"), "{sent:?}");
    assert!(!sent.iter().any(|t| t.contains("/usage")), "{sent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_color_a_terminal_chat_keeps_the_layout_and_drops_the_colours() {
    let setup = Setup::openai("followup").await;
    let mut pty = OnPty::start_with(&setup, &["chat"], "warn", &[("NO_COLOR", "1")]);
    pty.screen.wait_for("Ctrl-D leaves", 1);
    pty.press("markdown 0\r");
    pty.screen.wait_for("Done.", 1);
    pty.press("\x04");
    let status = pty.ended("Ctrl-D").await;
    assert!(status.success(), "{status:?}");
    let shown = pty.screen.text();
    assert!(
        shown.contains("• first") && shown.contains("┌"),
        "{shown:?}"
    );
    assert!(!has_style(&shown), "no colour with NO_COLOR: {shown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_beside_a_running_gateway_streams_on_the_terminal_through_its_rpc() {
    let setup = Setup::openai("followup").await;
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("RUST_LOG", "info");
    let gateway = common::Chat::spawn(cmd);
    gateway.wait_stderr_line("rpc listening on ").await;
    let mut pty = OnPty::start(&setup, &["chat"], "warn");
    pty.screen
        .wait_for("a gateway runs on this store: chatting through it", 1);
    pty.press("stall\r");
    pty.screen.wait_for("thinking...", 1);
    pty.press("\x03");
    pty.screen.wait_for("[stopping]", 1);
    pty.press("markdown 0\r");
    pty.screen.wait_for("Done.", 1);
    let shown = unstyled(&pty.screen.text());
    assert!(shown.contains("• first"), "{shown:?}");
    // Ctrl-C with no reply going: the chat ends, the terminal as it was.
    pty.press("\x03");
    let status = pty.ended("Ctrl-C").await;
    assert!(status.success(), "{status:?}: {:?}", pty.screen.text());
    assert!(pty.cooked(), "the terminal's settings were put back");
    gateway.signal("TERM");
    let stopped = gateway.finish().await;
    assert!(stopped.status.success(), "{}", stopped.stderr);
}

/// The screen a terminal of `rows` x `cols` shows after `bytes`, line by line.
fn drawn(bytes: &[u8], rows: u16, cols: u16) -> Vec<String> {
    let size = |n: u16| std::num::NonZeroU16::new(n).unwrap();
    let mut terminal = vt100::Parser::new(size(rows), size(cols), 0);
    terminal.process(bytes);
    terminal
        .screen()
        .rows(0, cols)
        .map(|row| row.trim_end().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_while_a_reply_streams_leaves_each_line_once_on_the_screen() {
    let setup = Setup::openai("followup").await;
    let mut pty = OnPty::start(&setup, &["chat"], "warn");
    let screen = pty.screen.clone();
    screen.wait_for("Ctrl-D leaves", 1);
    pty.press("slow 150 12\r");
    screen.wait_for("tick 3 ", 1);
    // An empty Enter, then a line, while the reply streams above the prompt.
    pty.press("\r");
    pty.press("hello mid\r");
    screen.wait_for("ok: hello mid", 1);
    pty.press("\x04");
    let status = pty.ended("Ctrl-D").await;
    assert!(status.success(), "{status:?}");
    let bytes = pty.screen.0.lock().unwrap().clone();
    let lines = drawn(&bytes, 30, 200);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(
        count("tick 1 tick 2"),
        1,
        "the streamed line once: {lines:#?}"
    );
    assert_eq!(count("tick 12"), 1, "{lines:#?}");
    assert_eq!(count("> hello mid"), 1, "the entered line once: {lines:#?}");
    assert_eq!(count("ok: hello mid"), 1, "{lines:#?}");
    assert_eq!(count(" thinking "), 0, "no spinner left: {lines:#?}");
    let tick_line = lines.iter().position(|l| l.contains("tick 12")).unwrap();
    let answer = lines
        .iter()
        .position(|l| l.contains("ok: hello mid"))
        .unwrap();
    assert!(tick_line < answer, "{lines:#?}");
}
