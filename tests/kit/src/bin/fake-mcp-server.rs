//! `fake-mcp-server [--log FILE] [--slow-start-ms N] [--crash-after N] [--fail-starts FILE]`:
//! the fake MCP server over stdio (see `chela_testkit::mcp` for methods and tools). Reads one
//! JSON-RPC message a line from stdin, writes one answer a line to stdout, logs nothing to
//! stdout, and exits 0 when stdin ends.
//!
//! - `--log FILE`: appends `start <pid>` at start, then one line per event: `<method>` per
//!   request or notification, `call <tool>` per `tools/call`, `cancelled <id>` per
//!   `notifications/cancelled`. A start failed by `--fail-starts` logs `failed-start <pid>`.
//! - `--slow-start-ms N`: waits N ms before answering `initialize`.
//! - `--crash-after N`: exits with status 3 right after answering the N-th `tools/call`.
//! - `--fail-starts FILE`: if FILE holds a number above 0, writes it back less one and exits
//!   1 at once.
//!
//! The `crash` tool exits with status 3 without answering.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use chela_testkit::mcp::{
    HandlerOptions, ServerArgs, StdioEnd, StdioOptions, append_line, file_observer, parse_args,
    serve_stdio, take_fail_start,
};

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(StdioEnd::Eof) => ExitCode::SUCCESS,
        // At once: tokio would wait for its blocked read of stdin before exiting.
        Ok(StdioEnd::Crashed) => std::process::exit(3),
        Err(message) => {
            eprintln!("fake-mcp-server: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: ServerArgs) -> Result<StdioEnd, String> {
    let pid = std::process::id();
    if let Some(file) = &args.fail_starts
        && take_fail_start(file).map_err(|e| format!("{}: {e}", file.display()))?
    {
        log_line(args.log.as_deref(), &format!("failed-start {pid}"))?;
        return Err("failing this start (--fail-starts)".to_owned());
    }
    log_line(args.log.as_deref(), &format!("start {pid}"))?;
    let observer = match &args.log {
        Some(log) => Some(file_observer(log).map_err(|e| format!("{}: {e}", log.display()))?),
        None => None,
    };
    let options = StdioOptions {
        handler: HandlerOptions {
            crash_tool: true,
            slow_start: Duration::from_millis(args.slow_start_ms),
            observer,
        },
        crash_after: args.crash_after,
    };
    serve_stdio(tokio::io::stdin(), tokio::io::stdout(), options)
        .await
        .map_err(|e| format!("stdio: {e}"))
}

fn log_line(log: Option<&Path>, line: &str) -> Result<(), String> {
    match log {
        Some(log) => append_line(log, line).map_err(|e| format!("{}: {e}", log.display())),
        None => Ok(()),
    }
}
