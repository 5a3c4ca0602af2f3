//! A fake MCP (Model Context Protocol) server, hand-written newline-delimited JSON-RPC 2.0:
//! over stdio as the `fake-mcp-server` binary ([`serve_stdio`]), and over streamable HTTP
//! in-process as [`FakeMcpHttp`]. Both share one protocol handler, [`McpHandler`].
//!
//! Methods: `initialize` (echoes the client's `protocolVersion` when it is one of
//! [`tools::PROTOCOL_VERSIONS`], else answers the newest; `serverInfo` `fake-mcp` `1.0.0`),
//! `notifications/initialized`, `ping`, `tools/list`, `tools/call`, `notifications/cancelled`
//! (ends the call of that id without an answer). Another method: error -32601. Requests run
//! concurrently.
//!
//! | tool | arguments | result text |
//! |---|---|---|
//! | `echo` | `text` | `echo: <text>` |
//! | `add` | `a`, `b` (numbers) | the sum, plus `structuredContent: {"sum": n}` |
//! | `env` | `name` | the server's environment variable, or `(unset)` |
//! | `read` | `path` | the file's contents, or `isError` with the OS error |
//! | `sleep` | `ms` | `slept <ms> ms` after that long (cancellable) |
//! | `fail` | | `isError`, `it failed` |
//! | `big` | `chars` | that many `x` |
//! | `image` | | `here is a picture` and a PNG image block ([`tools::IMAGE_BASE64`]) |
//! | `crash` | | stdio only: the process exits with status 3 without answering |
//!
//! An unknown tool, or bad arguments, is a result with `isError: true` (`unknown tool NAME`).
//!
//! Over HTTP, `tools/call` of `echo` and `sleep` is answered as an event stream (a priming
//! event, then the answer), everything else as one JSON object; see [`FakeMcpHttp`].

mod args;
mod call;
mod handler;
mod http;
mod http_routes;
mod http_state;
pub mod jsonrpc;
mod log;
mod sse;
mod stdio;
pub mod tools;

pub use args::{ServerArgs, USAGE, parse as parse_args};
pub use handler::{HandlerOptions, McpEvent, McpHandler, Observer, Reply};
pub use http::{FakeMcpHttp, McpHttpRequest};
pub use log::{append_line, file_observer, take_fail_start};
pub use stdio::{StdioEnd, StdioOptions, serve_stdio};
