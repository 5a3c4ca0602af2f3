//! Fakes for chela's tests, bound to 127.0.0.1 and spoken to over real sockets.
//!
//! Module map:
//! - [`model`]: [`FakeModel`], a fake model server speaking OpenAI Chat Completions
//!   (`POST /v1/chat/completions`), OpenAI Responses (`POST /v1/responses`), Anthropic Messages
//!   (`POST /v1/messages`, `POST /v1/messages/count_tokens`) and `GET /v1/models`; also the
//!   `fake-model` binary (`fake-model [--port N]`) for agents run as separate processes.
//! - [`telegram`]: [`FakeTelegram`], a fake Telegram Bot API (`/bot{token}/{method}`) for one
//!   bot, with simulated users, long polling, forum topics, edit/length/markup errors and 429s.
//! - [`discord`]: [`FakeDiscord`], a fake Discord gateway (WebSocket at `/gateway`) and REST API
//!   (`/api/v10`) for one bot, with simulated users in guild channels, threads and DMs, RESUME,
//!   nonce dedupe, the 2000-character limit and 429s; serenity 0.12 runs against it.
//! - [`slack`]: [`slack::FakeSlack`], a fake Slack for one bot app: the Web API
//!   (`/api/{method}`, bot and app tokens, Slack's error codes, 429s), Socket Mode (`hello`,
//!   `events_api` envelopes with acks and timed-out redelivery, `disconnect`), file uploads
//!   and private downloads, buttons and slash commands, with simulated users.
//! - [`web`]: [`FakeWeb`], a small web site (pages, redirects, a stalled and an endless page)
//!   with a fake Brave Search API and SearXNG instance, for the web tools.
//! - [`mcp`]: a fake MCP server (tools `echo`, `add`, `env`, `read`, `sleep`, `fail`, `big`,
//!   `image`, `crash`): [`FakeMcpHttp`] over streamable HTTP, and the `fake-mcp-server` binary
//!   over stdio (`--log`, `--slow-start-ms`, `--crash-after`, `--fail-starts`).
//! - [`speech`]: [`FakeSpeech`], a fake OpenAI-compatible text-to-speech endpoint
//!   (`POST /v1/audio/speech`, answering a few OGG/Opus bytes, or an error status when told).
//! - The `fake-acp-agent` binary: a scripted ACP v1 agent over stdio (its doc comment lists the
//!   prompt script: echo, `fs-read`, `fs-write`, `term`, `perm`, `slow`, `plan`, `crash`, ...).
//!
//! # How the fake model answers
//! It reads the *last user text*: the text of the last user-role message that carries text
//! (tool-result-only messages, `system` entries, Claude Code `<system-reminder>` blocks and its
//! `[Request interrupted by user]` marker do not count). If a tool result comes after it, the answer is `done: ` and the first 200
//! characters of the last tool result, so agents never loop. Otherwise the trimmed text may
//! start with a directive:
//!
//! | directive | answer |
//! |---|---|
//! | `tool <name> <json-object>` | one tool call (arguments default to `{}`) |
//! | `tools <json-array>` | several calls, `[{"name": .., "arguments": {..}}, ..]` |
//! | `run <command>` | one call to the first offered of `exec`, `exec_command`, `shell`, `Bash`, `bash`, with the arguments its schema asks for (`cmd`; `command` as `["bash", "-lc", ..]` when an array; else `command`); else text `no shell tool offered` |
//! | `escalate <command>` | as `run`, plus the sandbox escape the schema offers (`sandbox_permissions: "require_escalated"` or `with_escalated_permissions: true`, and a `justification`): makes Codex ask permission |
//! | `slow <ms> <n>` | `n` deltas `tick <i> `, each after a real delay of `ms` |
//! | `markdown <ms>` | a sample of markdown (heading, emphasis, list, table, code block) in 6-character deltas, each after a real delay of `ms` |
//! | `after <ms> <text>` | `ok: <text>` in one delta, after a real delay of `ms` (a model that takes its time) |
//! | `verbatim <text>` | exactly `<text>` (e.g. `verbatim HEARTBEAT_OK`) |
//! | `stall` | the delta `thinking...`, then silence until the client leaves |
//! | `error <status>` | HTTP `status` (400-599) with a provider-shaped error, `fake error <status>` |
//! | `ratelimit <n>` | first `n` requests with this exact text: 429 + `retry-after: 1`; then `ok: recovered` |
//! | `long <n>` | exactly `n` characters of prose, streamed in 50-character deltas |
//! | `think <rest>` | reasoning `Let me think about <rest>.` first (Anthropic: a thinking block signed `sig-<request#>`; chat completions: `reasoning_content`; Responses: a reasoning summary), then what `<rest>` answers |
//! | anything else (or a directive that does not parse) | `ok: ` + the text, one delta per word |
//!
//! The Messages endpoint refuses (400) what the API refuses in a request's shape: a tool loop
//! whose thinking breaks its rule (with `thinking` on, the assistant message before the last
//! tool results must start with a signed thinking block), an assistant message ending in
//! thinking, blank text blocks, more than 4 `cache_control` marks or one on thinking, and
//! `tools: null`.
//!
//! Tool-call ids are `call_<request#>_<i>` (`toolu_...` for Anthropic). Usage reports input
//! tokens as body characters / 4 and output tokens as answer characters / 4, and what a
//! simulated prompt cache holds (`model/cache.rs`): OpenAI's automatic prefix caching, and
//! Anthropic's `cache_control` marks, as cached (and written) tokens.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let model = chela_testkit::FakeModel::start().await?;
//! let base = model.openai_base_url(); // point a provider here
//! # let _ = base;
//! assert_eq!(model.request_count(), 0);
//! # Ok(()) }
//! ```

pub mod discord;
mod form;
pub mod mcp;
pub mod model;
mod serve;
pub mod slack;
pub mod speech;
pub mod telegram;
pub mod web;

pub use discord::{ChannelSpec, FakeDiscord, MessageOptions};
pub use mcp::FakeMcpHttp;
pub use model::{FakeModel, Outage, RecordedRequest};
pub use speech::{FakeSpeech, SpeechRequest};
pub use telegram::{ChatSpec, FakeTelegram, SendOptions, UserSpec};
pub use web::{FakeWeb, Route, WebHit};
