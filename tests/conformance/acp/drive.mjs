#!/usr/bin/env node
// Drives one real ACP agent (codex-acp or claude-agent-acp) against chela's fake-model with the
// ACP SDK's client side, and prints a JSON log of what happened, with timings.
//
//   node drive.mjs codex|claude [--model-url http://127.0.0.1:PORT] [--fake-model PATH]
//                               [--trace FILE] [--node PATH]
//
// Without --model-url it starts the fake-model binary (--fake-model, else $FAKE_MODEL, else
// $CARGO_TARGET_DIR/debug/fake-model, else <repo>/target/debug/fake-model) on a free port.
// --trace writes every JSON-RPC line of every agent process (both directions) as NDJSON.
// Scenarios, in order: initialize; session/new (temp cwd; Codex then session/set_mode read-only);
// two text turns; a tool turn that asks permission (answered allow_once by kind), one answered
// reject_once, one where session/cancel is sent while the permission request is open (answered
// outcome cancelled); Codex: an unescalated write (informational: its sandbox needs bwrap);
// Claude: a read-only `ls` that runs unasked; a cancel during a slow turn; a turn after it; and
// session/load of the first session in a new agent process when loadSession is advertised.
// The JSON log ends with `timings` and `checks`; the exit code is 1 if a check is false.

import { spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import * as acp from "@agentclientprotocol/sdk";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");

function parseArgs(argv) {
  const args = { agent: null, modelUrl: null, fakeModel: null, trace: null, node: process.execPath };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--model-url") args.modelUrl = value();
    else if (a === "--fake-model") args.fakeModel = value();
    else if (a === "--trace") args.trace = value();
    else if (a === "--node") args.node = value();
    else if (!a.startsWith("-") && !args.agent) args.agent = a;
    else throw new Error(`unknown argument ${a}`);
  }
  if (args.agent !== "codex" && args.agent !== "claude") {
    throw new Error("usage: node drive.mjs codex|claude [--model-url URL] [--fake-model PATH] [--trace FILE] [--node PATH]");
  }
  return args;
}

const now = () => performance.now();
const ms = (t) => Math.round(t * 10) / 10;

/** Starts fake-model on a free port; resolves to { url, child }. */
function startFakeModel(path) {
  const bin =
    path ??
    process.env.FAKE_MODEL ??
    join(process.env.CARGO_TARGET_DIR ?? join(repo, "target"), "debug", "fake-model");
  if (!existsSync(bin)) throw new Error(`fake-model binary not found at ${bin}; build it or pass --fake-model`);
  const child = spawn(bin, [], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`fake-model exited with ${code}`)));
    child.stdout.on("data", (data) => {
      out += data;
      const match = out.match(/listening (http:\/\/\S+)/);
      if (match) resolve({ url: match[1], child });
    });
  });
}

/** Agent command line and environment, each in fresh temp dirs. */
function agentSpec(agent, modelUrl, nodePath, home) {
  const base = { ...process.env };
  // Never let a real key or a login from the outside leak in.
  for (const key of ["OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"]) delete base[key];
  if (agent === "codex") {
    writeFileSync(
      join(home, "config.toml"),
      `model = "gpt-5.2"
model_provider = "local"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.local]
name = "local"
base_url = "${modelUrl}/v1"
wire_api = "responses"
env_key = "LOCAL_API_KEY"
requires_openai_auth = false
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`,
    );
    return {
      command: join(here, "node_modules", "@zed-industries", "codex-acp-linux-x64", "bin", "codex-acp"),
      args: [],
      // INITIAL_AGENT_MODE is read by newer adapters only; 0.16.0 starts in "auto" whatever it
      // says, so main() switches to read-only with session/set_mode.
      env: { ...base, CODEX_HOME: home, LOCAL_API_KEY: "fake", INITIAL_AGENT_MODE: "read-only", RUST_LOG: "warn" },
    };
  }
  return {
    command: nodePath,
    args: [join(here, "node_modules", "@agentclientprotocol", "claude-agent-acp", "dist", "index.js")],
    env: {
      ...base,
      ANTHROPIC_BASE_URL: modelUrl,
      ANTHROPIC_API_KEY: "fake",
      CLAUDE_CONFIG_DIR: home,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      IS_SANDBOX: "1",
    },
  };
}

/** One agent process behind a ClientSideConnection, recording everything it says. */
class Run {
  constructor(spec, label, trace) {
    this.label = label;
    this.trace = trace;
    this.updates = [];
    this.permissions = [];
    this.unexpected = [];
    this.stderr = "";
    this.onUpdate = null;
    this.permissionAnswer = "allow_once";
    this.t0 = now();
    this.child = spawn(spec.command, spec.args, { env: spec.env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.child.stderr.on("data", (d) => {
      this.stderr += d;
      if (this.stderr.length > 20000) this.stderr = this.stderr.slice(-20000);
    });
    this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve({ code, signal })));
    const input = Writable.toWeb(this.child.stdin);
    const output = Readable.toWeb(this.child.stdout);
    const log = (dir) =>
      new TransformStream({
        transform: (chunk, controller) => {
          this.record(dir, chunk);
          controller.enqueue(chunk);
        },
      });
    const fromAgent = output.pipeThrough(log("in"));
    const toAgentTap = log("out");
    toAgentTap.readable.pipeTo(input).catch(() => {});
    this.buffers = { in: "", out: "" };
    const stream = acp.ndJsonStream(toAgentTap.writable, fromAgent);
    this.conn = new acp.ClientSideConnection(() => this.client(), stream);
  }

  record(dir, chunk) {
    if (!this.trace) return;
    this.buffers[dir] += Buffer.from(chunk).toString("utf8");
    const lines = this.buffers[dir].split("\n");
    this.buffers[dir] = lines.pop();
    for (const line of lines) {
      if (!line.trim()) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        msg = line;
      }
      appendFileSync(this.trace, JSON.stringify({ run: this.label, t: ms(now() - this.t0), dir, msg }) + "\n");
    }
  }

  client() {
    return {
      sessionUpdate: async (params) => {
        this.updates.push({ t: now(), params });
        if (this.onUpdate) this.onUpdate(params);
      },
      requestPermission: async (params) => {
        const entry = { t: now(), params, answer: null };
        this.permissions.push(entry);
        if (this.permissionAnswer === "cancel-turn") {
          // What a client does when the user cancels while a permission question is open.
          this.cancelSentAt = now();
          await this.conn.cancel({ sessionId: params.sessionId });
          entry.answer = { outcome: "cancelled" };
          return { outcome: entry.answer };
        }
        const option =
          params.options.find((o) => o.kind === this.permissionAnswer) ??
          params.options.find((o) => o.kind.startsWith("allow"));
        entry.answer = option ? { outcome: "selected", optionId: option.optionId } : { outcome: "cancelled" };
        return { outcome: entry.answer };
      },
      readTextFile: async (params) => {
        this.unexpected.push({ method: "fs/read_text_file", params });
        throw acp.RequestError.methodNotFound("fs/read_text_file");
      },
      writeTextFile: async (params) => {
        this.unexpected.push({ method: "fs/write_text_file", params });
        throw acp.RequestError.methodNotFound("fs/write_text_file");
      },
      extMethod: async (method, params) => {
        this.unexpected.push({ method, params });
        throw acp.RequestError.methodNotFound(method);
      },
      extNotification: async (method, params) => {
        this.unexpected.push({ method, params, notification: true });
      },
    };
  }

  /** Kills the agent's process group and waits for it. */
  async stop() {
    try {
      this.child.stdin.end();
    } catch {}
    const timer = setTimeout(() => {
      try {
        process.kill(-this.child.pid, "SIGTERM");
      } catch {}
    }, 1500);
    const killer = setTimeout(() => {
      try {
        process.kill(-this.child.pid, "SIGKILL");
      } catch {}
    }, 4000);
    const result = await this.exited;
    clearTimeout(timer);
    clearTimeout(killer);
    return result;
  }
}

/** Summary of the updates received between two instants. */
function summarize(updates, from, to = Infinity) {
  const slice = updates.filter((u) => u.t >= from && u.t <= to);
  const kinds = {};
  let text = "";
  let firstToolCall = null;
  let firstToolCallUpdate = null;
  for (const { params } of slice) {
    const kind = params.update.sessionUpdate;
    kinds[kind] = (kinds[kind] ?? 0) + 1;
    if (kind === "agent_message_chunk" && params.update.content?.type === "text") text += params.update.content.text;
    if (kind === "tool_call" && !firstToolCall) firstToolCall = params;
    if (kind === "tool_call_update" && !firstToolCallUpdate) firstToolCallUpdate = params;
  }
  return { kinds, text, firstToolCall, firstToolCallUpdate, first: slice[0] ? ms(slice[0].t - from) : null };
}

const withTimeout = (promise, msecs, what) =>
  Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${msecs} ms`)), msecs)),
  ]);

/** One prompt turn; returns its record. */
async function turn(run, sessionId, text, { cancelAfterFirstChunkMs = null, timeoutMs = 60000 } = {}) {
  const start = now();
  let cancelAt = null;
  if (cancelAfterFirstChunkMs !== null) {
    run.onUpdate = (params) => {
      if (cancelAt === null && params.update.sessionUpdate === "agent_message_chunk") {
        cancelAt = -1;
        setTimeout(() => {
          cancelAt = now();
          run.conn.cancel({ sessionId });
        }, cancelAfterFirstChunkMs);
      }
    };
  }
  const record = { prompt: text };
  try {
    const response = await withTimeout(
      run.conn.prompt({ sessionId, prompt: [{ type: "text", text }] }),
      timeoutMs,
      `prompt ${JSON.stringify(text)}`,
    );
    const end = now();
    record.response = response;
    record.latencyMs = ms(end - start);
    if (cancelAt !== null && cancelAt > 0) record.cancelToResponseMs = ms(end - cancelAt);
  } catch (error) {
    record.error = String(error?.message ?? error);
    if (error?.code !== undefined) record.errorCode = error.code;
  }
  run.onUpdate = null;
  // Notifications may trail the response (Claude sends a session_info_update title).
  await new Promise((r) => setTimeout(r, 300));
  const s = summarize(run.updates, start);
  record.updateKinds = s.kinds;
  record.text = s.text;
  record.firstUpdateMs = s.first;
  const perms = run.permissions.filter((p) => p.t >= start);
  if (perms.length) record.permissionRequests = perms.map((p) => ({ request: p.params, answer: p.answer }));
  if (s.firstToolCall) record.firstToolCall = s.firstToolCall;
  if (s.firstToolCallUpdate) record.firstToolCallUpdate = s.firstToolCallUpdate;
  return record;
}

/** What must hold for the run to pass; each false fails the driver. */
function checks(steps) {
  const stop = (step) => step?.response?.stopReason;
  const asked = (step) => (step?.permissionRequests?.length ?? 0) > 0;
  const result = {
    textTurnEchoes: stop(steps.textTurn) === "end_turn" && steps.textTurn.text === "ok: hello there",
    toolTurnAskedAndRan: asked(steps.toolTurn) && steps.toolTurn.fileWritten === true && stop(steps.toolTurn) === "end_turn",
    rejectTurnAskedAndDidNotRun: asked(steps.rejectTurn) && steps.rejectTurn.fileWritten === false,
    cancelWhilePermissionPendingCancels: stop(steps.cancelPermissionTurn) === "cancelled",
    cancelDuringSlowTurnCancels: stop(steps.cancelTurn) === "cancelled",
    turnAfterCancelIsClean: steps.afterCancelTurn?.text === "ok: after cancel",
  };
  if (steps.readOnlyToolTurn) {
    result.readOnlyToolTurnRanUnasked = !asked(steps.readOnlyToolTurn) && stop(steps.readOnlyToolTurn) === "end_turn";
  }
  if (!steps.loadSession?.skipped) {
    result.loadReplaysHistory = (steps.loadSession?.replayedBeforeResponse?.user_message_chunk ?? 0) > 0;
    result.turnAfterLoad = stop(steps.loadedTurn) === "end_turn" && steps.loadedTurn.text === "ok: after load";
  }
  return result;
}

/** The figures of a run in one place: ms per step, per turn, and the stop reasons. */
function timings(steps) {
  const out = {
    startToInitializeMs: steps.initialize?.ms,
    newSessionMs: steps.newSession?.ms,
    turns: {},
  };
  for (const [name, step] of Object.entries(steps)) {
    if (step && step.prompt !== undefined) {
      out.turns[name] = {
        ms: step.latencyMs,
        firstUpdateMs: step.firstUpdateMs,
        stopReason: step.response?.stopReason ?? step.error,
      };
      if (step.cancelToResponseMs !== undefined) out.turns[name].cancelToResponseMs = step.cancelToResponseMs;
    }
  }
  if (steps.loadSession?.ms !== undefined) {
    out.loadProcessStartToInitializeMs = steps.loadSession.initializeMs;
    out.loadSessionMs = steps.loadSession.ms;
  }
  if (steps.firstExit) out.exitAfterStdinCloseMs = steps.firstExit.ms;
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.trace) writeFileSync(args.trace, "");
  let fake = null;
  let modelUrl = args.modelUrl;
  if (!modelUrl) {
    fake = await startFakeModel(args.fakeModel);
    modelUrl = fake.url;
  }
  const home = mkdtempSync(join(tmpdir(), `acp-${args.agent}-home-`));
  const cwd = mkdtempSync(join(tmpdir(), `acp-${args.agent}-cwd-`));
  const spec = agentSpec(args.agent, modelUrl, args.node, home);
  const log = { agent: args.agent, modelUrl, cwd, steps: {} };
  const clientInfo = { name: "chela-drive", version: "0.0.0" };
  const initParams = {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo,
  };

  const run = new Run(spec, "first", args.trace);
  try {
    const init = await withTimeout(run.conn.initialize(initParams), 30000, "initialize");
    log.steps.initialize = { ms: ms(now() - run.t0), response: init };
    const loadable = Boolean(init.agentCapabilities?.loadSession);

    let t = now();
    const session = await withTimeout(run.conn.newSession({ cwd, mcpServers: [] }), 30000, "session/new");
    log.steps.newSession = { ms: ms(now() - t), response: session };
    // Updates sent right after session/new (available_commands_update, ...).
    await new Promise((r) => setTimeout(r, 300));
    log.steps.newSession.updateKinds = summarize(run.updates, t).kinds;
    const sessionId = session.sessionId;
    if (args.agent === "codex" && session.modes && session.modes.currentModeId !== "read-only") {
      t = now();
      const setMode = await withTimeout(
        run.conn.setSessionMode({ sessionId, modeId: "read-only" }),
        10000,
        "session/set_mode",
      );
      await new Promise((r) => setTimeout(r, 100));
      log.steps.setMode = { ms: ms(now() - t), response: setMode, updateKinds: summarize(run.updates, t).kinds };
    }

    log.steps.textTurn = await turn(run, sessionId, "hello there");
    log.steps.textTurn2 = await turn(run, sessionId, "second turn");

    // Writing a file outside the read-only sandbox / a non-read-only Bash command asks first.
    const command = `echo approved > ${join(cwd, "made-by-agent.txt")}`;
    // Codex: `escalate` makes the fake model set sandbox_permissions: "require_escalated".
    const toolPrompt = args.agent === "codex" ? `escalate ${command}` : `run ${command}`;
    log.steps.toolTurn = await turn(run, sessionId, toolPrompt);
    log.steps.toolTurn.fileWritten = existsSync(join(cwd, "made-by-agent.txt"));

    run.permissionAnswer = "reject_once";
    const rejected = `echo rejected > ${join(cwd, "rejected.txt")}`;
    log.steps.rejectTurn = await turn(run, sessionId, args.agent === "codex" ? `escalate ${rejected}` : `run ${rejected}`);
    log.steps.rejectTurn.fileWritten = existsSync(join(cwd, "rejected.txt"));
    run.permissionAnswer = "allow_once";

    // session/cancel while a permission request is open, answered with outcome cancelled.
    run.permissionAnswer = "cancel-turn";
    const pending = `echo pending > ${join(cwd, "pending.txt")}`;
    log.steps.cancelPermissionTurn = await turn(
      run,
      sessionId,
      args.agent === "codex" ? `escalate ${pending}` : `run ${pending}`,
    );
    log.steps.cancelPermissionTurn.fileWritten = existsSync(join(cwd, "pending.txt"));
    run.permissionAnswer = "allow_once";

    if (args.agent === "codex") {
      // Informational: a plain (unescalated) write in read-only mode.
      const sandboxed = `echo sandboxed > ${join(cwd, "sandboxed.txt")}`;
      log.steps.sandboxedWriteTurn = await turn(run, sessionId, `run ${sandboxed}`);
      log.steps.sandboxedWriteTurn.fileWritten = existsSync(join(cwd, "sandboxed.txt"));

    } else {
      // A read-only Bash command runs without asking in the default permission mode.
      log.steps.readOnlyToolTurn = await turn(run, sessionId, `run ls ${cwd}`);
    }

    log.steps.cancelTurn = await turn(run, sessionId, "slow 200 100", { cancelAfterFirstChunkMs: 300 });

    log.steps.afterCancelTurn = await turn(run, sessionId, "after cancel");

    log.unexpectedClientCalls = run.unexpected;
    const t2 = now();
    log.steps.firstExit = await run.stop();
    log.steps.firstExit.ms = ms(now() - t2);

    if (loadable) {
      const again = new Run(spec, "load", args.trace);
      try {
        const init2 = await withTimeout(again.conn.initialize(initParams), 30000, "initialize (load)");
        const initMs = ms(now() - again.t0);
        t = now();
        const loaded = await withTimeout(
          again.conn.loadSession({ sessionId, cwd, mcpServers: [] }),
          30000,
          "session/load",
        );
        const loadMs = ms(now() - t);
        const replayed = summarize(again.updates, again.t0, now());
        log.steps.loadSession = {
          initializeMs: initMs,
          ms: loadMs,
          response: loaded,
          replayedBeforeResponse: replayed.kinds,
          replayedText: replayed.text,
          loadSessionAdvertised: Boolean(init2.agentCapabilities?.loadSession),
        };
        log.steps.loadedTurn = await turn(again, sessionId, "after load");
      } catch (error) {
        log.steps.loadSession = { error: String(error?.message ?? error), stderrTail: again.stderr.slice(-2000) };
      } finally {
        await again.stop();
      }
    } else {
      log.steps.loadSession = { skipped: "loadSession not advertised" };
    }
  } catch (error) {
    log.error = String(error?.stack ?? error);
    log.stderrTail = run.stderr.slice(-4000);
    await run.stop();
  } finally {
    if (fake) fake.child.kill("SIGTERM");
    log.cwdFiles = readdirSync(cwd);
    rmSync(home, { recursive: true, force: true });
    rmSync(cwd, { recursive: true, force: true });
  }
  log.timings = timings(log.steps);
  log.checks = checks(log.steps);
  const failed = Object.values(log.checks).includes(false);
  process.stdout.write(JSON.stringify(log, null, 2) + "\n");
  process.exit(log.error || failed ? 1 : 0);
}

main().catch((error) => {
  console.error(error);
  process.exit(2);
});
