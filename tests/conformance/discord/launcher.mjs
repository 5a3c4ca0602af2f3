#!/usr/bin/env node
// Starts the third-party Discord emulator `discord-digital-twin` (0.1.1) for chela's
// conformance test: one guild with one text channel, the bot and one human user. The package
// is not patched; this file only fills the gaps listed below, and gives the Rust test a small
// control channel to drive the emulator's JS actor API.
//
// Usage: node launcher.mjs [TOKEN]   (or DISCORD_TWIN_TOKEN; default `chela-conformance-token`)
// Prints exactly one line on stdout once ready:
//   `listening http://127.0.0.1:PORT ws://127.0.0.1:PORT/gateway`
// (the REST base for serenity's proxy, which requests `{base}/api/v10/...`, and the gateway).
//
// Control channel: one JSON command per line on stdin, one JSON answer per line on stdout, in
// order (`{"ok":true,...}` or `{"ok":false,"error":"..."}`):
//   {"cmd":"info"}                                        -> {guild, channel, user, bot}
//   {"cmd":"user_message","channel":ID,"content":TEXT}    -> {message}   (the user writes)
//   {"cmd":"create_thread","channel":ID,"message":ID,"name":TEXT} -> {thread}
//                                                            (the user opens a thread there)
//   {"cmd":"messages","channel":ID}                       -> {messages}  (oldest first)
//   {"cmd":"threads","channel":ID}                        -> {threads}   (under a parent)
//   {"cmd":"wait_reply","channel":ID,"timeout_ms":N}      -> {message}   (first bot message)
//   {"cmd":"press","channel":ID,"message":ID,"custom_id":TEXT} -> {interaction: {id, token}}
//                                    (the user presses a button under a message: the
//                                     emulator's own INTERACTION_CREATE, type 3)
//   {"cmd":"interaction","id":ID}                         -> {interaction}
//                                    (the emulator's record of the bot's response to it:
//                                     acknowledged, type, data, messageId)
// On stderr: one JSON line per MESSAGE_CREATE / MESSAGE_UPDATE / MESSAGE_DELETE /
// THREAD_CREATE the emulator dispatches (with the text and the buttons at that moment), since
// its store keeps only the latest text of a message. Exits when stdin closes (the parent test went away), and
// on SIGTERM/SIGINT.
//
// Gaps filled (each one is something real Discord does that the emulator does not):
//  1. It listens on every interface (`listen(0)`): we bind it to 127.0.0.1.
//  2. Its REST routes accept any token or none: we answer 401 unless the request carries
//     `Authorization: Bot <token>`, as Discord does (its gateway checks the token already).
//  3. Its MESSAGE_CREATE dispatch always carries `mentions: []`: we fill in the users that
//     `<@id>` / `<@!id>` in the content name, as Discord does.
//  4. It has no actor for a *user* opening a thread (its thread routes act as the bot, and give
//     the thread a fresh id): `create_thread` opens a public thread from a user's message with
//     the user as owner and, as on Discord, the starter message's id as the thread id, then
//     dispatches THREAD_CREATE like the emulator's own route.
//  5. For a button press answered with a deferred message (callback type 5), `@original` is
//     a new response message on Discord; the emulator pre-creates the interaction's record
//     with the pressed message's id (src/index.ts, `simulateInteraction`:
//     `messageId: messageId ?? null`), keeps it through the callback (src/server.ts, the
//     `/interactions/.../callback` route: `let messageId = existing.messageId`), so its
//     `PATCH /webhooks/.../messages/@original` edits the message the button is under. For
//     presses made through `press`, we detach that id before such a request, so the
//     emulator's own "deferred: create the message on first edit" path runs.
// Not filled, on purpose: `GET /api/v10/gateway` is missing, so chela must be given
// `gateway_url` (serenity otherwise falls back to the real gateway); rate limits, the 2000-char
// limit and `enforce_nonce` de-duplication are not emulated (chela's own fakes cover those);
// the answer to a deferred *ephemeral* response becomes an ordinary channel message (flags 0,
// dispatched as MESSAGE_UPDATE to everyone), which the test tells apart by the interaction's
// record.
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DigitalDiscord } from 'discord-digital-twin';

// Discord's channel types (the emulator's dependency `discord-api-types` is not ours to import).
const GUILD_TEXT = 0;
const PUBLIC_THREAD = 11;
// Discord's interaction callback type "deferred channel message with source".
const DEFERRED_CHANNEL_MESSAGE = 5;
// Discord's component type of a button.
const BUTTON = 2;

// Not in the package's `exports`, so imported by path: the emulator's own serializer, so a
// thread we create looks exactly like one its routes create.
const here = path.dirname(fileURLToPath(import.meta.url));
const { channelToAPI } = await import(
  pathToFileURL(path.join(here, 'node_modules/discord-digital-twin/dist/serializers.js')).href
);

const TOKEN = process.argv[2] || process.env.DISCORD_TWIN_TOKEN || 'chela-conformance-token';
// Fixed snowflakes, so logs read the same on every run.
const GUILD = '1100000000000000001';
const CHANNEL = '1100000000000000002';
const USER = '1100000000000000003';
const BOT = '1100000000000000004';

const discord = new DigitalDiscord({
  botToken: TOKEN,
  botUser: { id: BOT, username: 'chela' },
  guild: { id: GUILD, name: 'Conformance', ownerId: USER },
  channels: [{ id: CHANNEL, name: 'general', type: GUILD_TEXT }],
  users: [{ id: USER, username: 'ann' }],
});

// Gap 1: the emulator calls `httpServer.listen(0, cb)`; bind that one call to loopback.
const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function listenOnLoopback(port, ...rest) {
  if (port === 0 && typeof rest[0] === 'function') return listen.call(this, 0, '127.0.0.1', ...rest);
  return listen.call(this, port, ...rest);
};
try {
  await discord.start();
} finally {
  http.Server.prototype.listen = listen;
}
// The emulator's internals (a TypeScript-private field): its HTTP server and gateway.
const { httpServer, gateway } = discord.server;

// Gap 5: interaction token -> the message whose button was pressed (presses made by `press`).
const pressed = new Map();
const ORIGINAL = /^\/api\/v10\/webhooks\/\d+\/([^/]+)\/messages\/(?:@|%40)original(?:[?]|$)/;

// Gap 5: a deferred-message answer's `@original` is not the pressed message.
async function detachFromPressed(token) {
  const record = await discord.prisma.interactionResponse.findUnique({
    where: { interactionToken: token },
  });
  if (record && record.type === DEFERRED_CHANNEL_MESSAGE && record.messageId === pressed.get(token)) {
    await discord.prisma.interactionResponse.update({
      where: { interactionId: record.interactionId }, data: { messageId: null },
    });
  }
}

// Gap 2: REST calls must carry the bot token.
const [handler] = httpServer.listeners('request');
httpServer.removeAllListeners('request');
httpServer.on('request', (req, res) => {
  if (req.url.startsWith('/api/') && req.headers.authorization !== `Bot ${TOKEN}`) {
    res.writeHead(401, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ message: '401: Unauthorized', code: 0 }));
    return;
  }
  const original = req.url.match(ORIGINAL);
  const token = original && decodeURIComponent(original[1]);
  if (token && pressed.has(token)) {
    detachFromPressed(token).then(() => handler(req, res), (e) => {
      process.stderr.write(`launcher: ${e && e.stack}\n`);
      res.writeHead(500).end();
    });
    return;
  }
  handler(req, res);
});

// Gap 3: mentions in MESSAGE_CREATE (the users are known up front; the dispatch is synchronous).
const users = new Map();
for (const u of await discord.prisma.user.findMany()) {
  users.set(u.id, {
    id: u.id, username: u.username, global_name: u.globalName ?? null,
    discriminator: '0', avatar: null, bot: u.bot,
  });
}
// Every dispatch goes through `gateway.broadcast` (`broadcastMessageCreate` included).
const broadcast = gateway.broadcast.bind(gateway);
gateway.broadcast = (event, data) => {
  if (event === 'MESSAGE_CREATE') {
    const named = [...String(data.content ?? '').matchAll(/<@!?(\d+)>/g)].map((m) => m[1]);
    data = { ...data, mentions: [...new Set(named)].filter((id) => users.has(id)).map((id) => users.get(id)) };
  }
  // The event log (stderr).
  if (['MESSAGE_CREATE', 'MESSAGE_UPDATE', 'MESSAGE_DELETE', 'THREAD_CREATE'].includes(event)) {
    process.stderr.write(`${JSON.stringify({
      event, id: data.id, channel_id: data.channel_id ?? null, parent_id: data.parent_id ?? null,
      author: data.author?.id ?? null, content: data.content ?? null,
      edited: data.edited_timestamp != null, buttons: buttons(data.components),
    })}\n`);
  }
  broadcast(event, data);
};

// The buttons of a message's action rows as [label, custom_id] pairs (none: []).
function buttons(components) {
  return (components ?? []).flatMap((row) => row.components ?? [])
    .filter((c) => c.type === BUTTON).map((c) => [c.label ?? null, c.custom_id ?? null]);
}

// Gap 4: a user opens a public thread from their message (mirrors the emulator's
// `POST /channels/:id/messages/:mid/threads`, with the user as owner and Discord's thread id).
async function createThread({ channel, message, name }) {
  const parent = await discord.prisma.channel.findUniqueOrThrow({ where: { id: channel } });
  const starter = await discord.prisma.message.findUniqueOrThrow({ where: { id: message } });
  if (starter.channelId !== channel) throw new Error(`message ${message} is not in ${channel}`);
  await discord.prisma.channel.create({
    data: {
      id: message, guildId: parent.guildId, type: PUBLIC_THREAD, name,
      parentId: channel, ownerId: starter.authorId, autoArchiveDuration: 1440,
      archiveTimestamp: new Date(), starterMessageId: message, memberCount: 1,
    },
  });
  await discord.prisma.threadMember.create({ data: { channelId: message, userId: starter.authorId } });
  const thread = channelToAPI(await discord.prisma.channel.findUniqueOrThrow({ where: { id: message } }));
  gateway.broadcast('THREAD_CREATE', { ...thread, newly_created: true });
  return thread;
}

const byId = (a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1);
const commands = {
  info: async () => ({ guild: GUILD, channel: CHANNEL, user: USER, bot: BOT }),
  user_message: async (c) => ({
    message: await discord.simulateUserMessage({
      channelId: c.channel, userId: c.user ?? USER, content: c.content,
    }),
  }),
  create_thread: async (c) => ({ thread: await createThread(c) }),
  messages: async (c) => ({ messages: (await discord.channel(c.channel).getMessages()).sort(byId) }),
  threads: async (c) => ({ threads: await discord.channel(c.channel).getThreads() }),
  press: async (c) => {
    const interaction = await discord.simulateButtonClick({
      channelId: c.channel, userId: c.user ?? USER, messageId: c.message, customId: c.custom_id,
    });
    pressed.set(interaction.token, c.message);
    return { interaction };
  },
  interaction: async (c) => {
    const record = await discord.prisma.interactionResponse.findUnique({ where: { interactionId: c.id } });
    if (!record) throw new Error(`no interaction ${c.id}`);
    return { interaction: { ...record, data: record.data ? JSON.parse(record.data) : null } };
  },
  wait_reply: async (c) => ({
    message: await discord.channel(c.channel).waitForBotReply({ timeout: c.timeout_ms ?? 10000 }),
  }),
};

const answer = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
const stop = () => {
  discord.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

process.stdout.write(`listening http://127.0.0.1:${discord.port} ws://127.0.0.1:${discord.port}/gateway\n`);

// Commands run one at a time, so answers come back in the order asked.
const lines = readline.createInterface({ input: process.stdin });
lines.on('close', stop);
for await (const line of lines) {
  if (!line.trim()) continue;
  try {
    const command = JSON.parse(line);
    const run = commands[command.cmd];
    if (!run) throw new Error(`unknown cmd ${command.cmd}`);
    answer({ ok: true, ...(await run(command)) });
  } catch (e) {
    answer({ ok: false, error: String(e && e.message ? e.message : e) });
  }
}
