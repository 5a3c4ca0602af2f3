#!/usr/bin/env node
// Starts the third-party Telegram Bot API emulator `telegram-test-api` (4.2.1) for chela's
// conformance test, with a thin layer of corrected Bot API handlers in front of its stock
// routes. The package itself is not patched: its route list (`lib/routes/index`) is an array
// the server walks when it is constructed, so we put our handlers at its head, swap its
// unknown-method route for a 404 and add a last-resort 404/400 pair at its tail.
//
// Every corrected handler works on the emulator's own state (`server.storage`,
// `addBotMessage`, `editMessageText`, `deleteMessage`, its events), so the emulator's client
// API keeps working: `POST /sendMessage` (a simulated user writes to the bot) and
// `POST /getUpdatesHistory` (what the bot sent, with edits applied), and
// `POST /sendCallback` (a simulated user presses an inline keyboard button).
//
// Usage: node launcher.js [PORT]   (or TELEGRAM_TEST_API_PORT; 0 or nothing: any free port)
// Prints exactly one line on stdout once ready: `listening http://127.0.0.1:PORT`.
// On stderr: one JSON line per state-changing bot call (sendMessage and editMessageText with
// their text and inline keyboard, deleteMessage, answerCallbackQuery), since the emulator's
// history keeps only the latest text of a message, forgets deleted ones and keeps no answers
// to button presses. Exits on SIGTERM/SIGINT, and when stdin is a pipe that
// closes (the parent test died).
'use strict';

const fs = require('fs');
const TelegramServer = require('telegram-test-api');
const { routes } = require('telegram-test-api/lib/routes/index');
const { unknownMethod } = require('telegram-test-api/lib/routes/bot/unknownMethod');

// Longest getUpdates long poll we honour (Telegram allows up to 50 s).
const MAX_POLL_S = 50;

const nowS = () => Math.floor(Date.now() / 1000);
// The emulator stamps everything in milliseconds; the Bot API speaks seconds.
const toSeconds = (t) => (t > 1e11 ? Math.floor(t / 1000) : t);

// Query string, form body and JSON body alike (the Bot API accepts all three).
function params(req) {
  const p = Object.assign({}, req.query, req.body);
  for (const k of ['allowed_updates', 'reply_markup', 'commands']) {
    if (typeof p[k] === 'string') {
      try { p[k] = JSON.parse(p[k]); } catch (_) { /* left as is */ }
    }
  }
  return p;
}

function ok(res, result) {
  res.status(200).json({ ok: true, result });
}

function fail(res, code, description, extra) {
  res.status(code).json(Object.assign({ ok: false, error_code: code, description }, extra));
}

// The inline keyboard a request (or a stored message) carries, or null.
function keyboard(p) {
  const markup = p && p.reply_markup;
  return markup && Array.isArray(markup.inline_keyboard) ? markup.inline_keyboard : null;
}

function logCall(method, fields) {
  process.stderr.write(`${JSON.stringify(Object.assign({ method }, fields))}\n`);
}

// `app.all` for one Bot API method, GET or POST like the real API; express matches paths
// case-insensitively, so teloxide's `/bot<token>/SendMessage` lands here too.
function method(app, name, handler) {
  app.all(`/bot:token/${name}`, (req, res, next) => {
    Promise.resolve(handler(req, res, req.params.token, params(req))).catch(next);
  });
}

// The bot's own user: the real API derives the id from the token's prefix.
function botUser(token) {
  const id = Number(String(token).split(':')[0]);
  return {
    id: Number.isSafeInteger(id) && id > 0 ? id : 666,
    is_bot: true,
    first_name: 'Test First name',
    username: 'TestNameBot',
  };
}

function installCorrections(app, server) {
  const polls = new Map(); // token -> the getUpdates request waiting now
  const confirmed = new Map(); // token -> lowest update_id not yet confirmed
  const commands = new Map(); // token -> the last setMyCommands list
  let topicId = 1000;

  // A chat object for `chat_id`: the one a simulated user wrote from, else a plausible one.
  function chatOf(chatId) {
    const id = Number(chatId);
    for (let i = server.storage.userMessages.length - 1; i >= 0; i--) {
      const m = server.storage.userMessages[i].message;
      if (m && m.chat && Number(m.chat.id) === id) return m.chat;
    }
    return id > 0
      ? { id, type: 'private', first_name: 'User' }
      : { id, type: 'supergroup', title: 'Group', is_forum: true };
  }

  // A stored bot message as a Bot API Message. Gap: the stock sendMessage answers with the
  // request body echoed (chat_id, parse_mode, ...), a date in milliseconds and no `from`.
  function botMessage(entry) {
    const body = entry.message;
    const message = {
      message_id: entry.messageId,
      from: botUser(entry.botToken),
      chat: chatOf(body.chat_id),
      date: toSeconds(entry.time),
      text: body.text,
    };
    if (body.message_thread_id !== undefined) {
      message.message_thread_id = Number(body.message_thread_id);
      message.is_topic_message = true;
    }
    if (body.edit_date !== undefined) message.edit_date = body.edit_date;
    if (body.reply_markup && body.reply_markup.inline_keyboard) {
      message.reply_markup = body.reply_markup;
    }
    return message;
  }

  function findBotMessage(token, chatId, messageId) {
    return server.storage.botMessages.find((u) => u.botToken === token
      && String(u.messageId) === String(messageId)
      && String(u.message.chat_id) === String(chatId));
  }

  // Gaps: the stock callback_query lacks `chat_instance` (required by the Bot API; teloxide
  // drops the update without it), and its `message` is whatever the simulated user posted.
  // Here: the message is the bot's stored message the button is under, as Telegram sends it
  // (a press on a message the emulator does not have keeps the posted one), and
  // `chat_instance` is derived from the chat.
  function callbackQuery(token, update) {
    const query = Object.assign({}, update.callback_query);
    const posted = query.message || {};
    const chatId = posted.chat ? posted.chat.id : posted.chat_id;
    const entry = findBotMessage(token, chatId, posted.message_id);
    if (entry) query.message = botMessage(entry);
    query.chat_instance = `ci-${chatId}`;
    return query;
  }

  // The callback query ids the emulator handed out, and those already answered.
  function callbackKnown(token, id) {
    return server.storage.userMessages.some((u) => u.botToken === token
      && u.callbackQuery !== undefined && String(u.callbackId) === String(id));
  }
  const answered = new Set();

  // Gap: getMe lacks is_bot and the Me fields teloxide requires (its dispatcher panics).
  method(app, 'getMe', (req, res, token) => {
    ok(res, Object.assign(botUser(token), {
      can_join_groups: true,
      can_read_all_group_messages: false,
      supports_inline_queries: false,
      can_connect_to_business: false,
      has_main_web_app: false,
    }));
  });

  // Gaps: the stock getUpdates ignores offset (it hands out each update once and forgets
  // it), limit, timeout (no long polling: a client spins hundreds of polls a second) and
  // allowed_updates, and its message dates are in milliseconds.
  // Here: `offset` confirms every update below it (never served again; they stay in storage
  // so /getUpdatesHistory still lists the user's messages), unconfirmed updates come again,
  // a negative offset keeps only the last |offset|, `limit` caps the batch (1-100), `timeout`
  // long-polls on the emulator's "user added something" events, `allowed_updates` filters,
  // and a newer poll for the same token ends the waiting one with 409 like Telegram does.
  method(app, 'getUpdates', async (req, res, token, p) => {
    const allowed = Array.isArray(p.allowed_updates) && p.allowed_updates.length
      ? p.allowed_updates : null;
    const limit = Math.min(Math.max(Number(p.limit) || 100, 1), 100);
    const timeoutS = Math.min(Math.max(Number(p.timeout) || 0, 0), MAX_POLL_S);
    const offset = Number(p.offset) || 0;

    const unconfirmed = () => server.storage.userMessages.filter((u) => u.botToken === token
      && u.updateId >= (confirmed.get(token) || 0));
    if (offset > 0) {
      confirmed.set(token, Math.max(confirmed.get(token) || 0, offset));
    } else if (offset < 0) {
      const keep = unconfirmed().slice(offset);
      if (keep.length) confirmed.set(token, keep[0].updateId);
    }
    const batch = () => unconfirmed()
      .map((u) => {
        const update = TelegramServer.formatUpdate(u);
        if (update.message) {
          const { botToken, ...message } = update.message;
          message.date = toSeconds(message.date || u.time);
          update.message = message;
        }
        if (update.callback_query) update.callback_query = callbackQuery(token, update);
        return [u, update];
      })
      .filter(([, update]) => !allowed || allowed.some((kind) => kind in update))
      .slice(0, limit)
      .map(([u, update]) => {
        u.isRead = true; // the stock flag (shown by /getUpdatesHistory), kept coherent
        return update;
      });

    const previous = polls.get(token);
    if (previous) previous.supersede();
    const deadline = Date.now() + timeoutS * 1000;
    let superseded = false;
    let closed = false;
    let wake = () => {};
    const waiter = { supersede: () => { superseded = true; wake(); } };
    polls.set(token, waiter);
    const events = ['AddedUserMessage', 'AddedUserCommand', 'AddedUserCallbackQuery'];
    const onClose = () => { closed = true; wake(); };
    res.on('close', onClose);
    try {
      for (;;) {
        if (superseded) {
          fail(res, 409, 'Conflict: terminated by other getUpdates request; make sure that '
            + 'only one bot instance is running');
          return;
        }
        if (closed) return;
        const updates = batch();
        const left = deadline - Date.now();
        if (updates.length || left <= 0) {
          ok(res, updates);
          return;
        }
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => { clearTimeout(timer); resolve(); };
          for (const e of events) server.once(e, wake);
        });
        for (const e of events) server.off(e, wake);
      }
    } finally {
      res.off('close', onClose);
      if (polls.get(token) === waiter) polls.delete(token);
    }
  });

  // Gap: the answer is the echoed request with a date in ms; a Message is expected.
  method(app, 'sendMessage', (req, res, token, p) => {
    if (p.chat_id === undefined) return fail(res, 400, 'Bad Request: chat_id is empty');
    if (!p.text) return fail(res, 400, 'Bad Request: message text is empty');
    server.addBotMessage(p, token);
    const entry = server.storage.botMessages[server.storage.botMessages.length - 1];
    logCall('sendMessage', {
      chat_id: Number(p.chat_id), message_id: entry.messageId, text: p.text,
      inline_keyboard: keyboard(p),
    });
    return ok(res, botMessage(entry));
  });

  // Gaps: the stock edit answers `result: null` (teloxide expects the edited Message),
  // succeeds silently for a message that does not exist, never says "not modified", and
  // keeps the inline keyboard of an edit that carries none (Telegram removes it).
  method(app, 'editMessageText', (req, res, token, p) => {
    if (p.inline_message_id !== undefined) {
      return fail(res, 400, 'Bad Request: inline messages are not emulated');
    }
    const entry = findBotMessage(token, p.chat_id, p.message_id);
    if (!entry) return fail(res, 400, 'Bad Request: message to edit not found');
    const sameMarkup = JSON.stringify(keyboard(entry.message)) === JSON.stringify(keyboard(p));
    if (entry.message.text === p.text && sameMarkup) {
      return fail(res, 400, 'Bad Request: message is not modified: specified new message '
        + 'content and reply markup are exactly the same as a current content and reply '
        + 'markup of the message');
    }
    server.editMessageText(Object.assign({}, p, { edit_date: nowS() }));
    if (keyboard(p) === null) delete entry.message.reply_markup;
    logCall('editMessageText', {
      chat_id: Number(p.chat_id), message_id: entry.messageId, text: p.text,
      inline_keyboard: keyboard(p),
    });
    return ok(res, botMessage(entry));
  });

  // Gap: the stock delete answers `result: null`; teloxide expects `true`.
  method(app, 'deleteMessage', (req, res, token, p) => {
    const chatId = Number(p.chat_id);
    const messageId = Number(p.message_id);
    if (!server.deleteMessage(chatId, messageId)) {
      return fail(res, 400, 'Bad Request: message to delete not found');
    }
    logCall('deleteMessage', { chat_id: chatId, message_id: messageId });
    return ok(res, true);
  });

  // Gaps: the stock answerCallbackQuery answers `result: null` (the Bot API says `true`),
  // accepts any id or none, and keeps nothing. Here: an id the emulator never handed out,
  // or one answered already, is refused as Telegram does; each answer is logged.
  method(app, 'answerCallbackQuery', (req, res, token, p) => {
    const id = String(p.callback_query_id === undefined ? '' : p.callback_query_id);
    const key = `${token} ${id}`;
    if (!callbackKnown(token, id) || answered.has(key)) {
      return fail(res, 400, 'Bad Request: query is too old and response timeout expired or '
        + 'query ID is invalid');
    }
    answered.add(key);
    logCall('answerCallbackQuery', {
      callback_query_id: id, text: p.text === undefined ? null : p.text,
      show_alert: Boolean(p.show_alert),
    });
    return ok(res, true);
  });

  // Gap: every method below is missing from the emulator, which answers HTTP 500 (and
  // teloxide sleeps 10 s on any 5xx). They have no state in the emulator worth modelling.
  method(app, 'sendChatAction', (req, res, token, p) => {
    if (p.chat_id === undefined || !p.action) {
      return fail(res, 400, 'Bad Request: chat_id and action are required');
    }
    return ok(res, true);
  });
  method(app, 'setMyCommands', (req, res, token, p) => {
    commands.set(token, Array.isArray(p.commands) ? p.commands : []);
    ok(res, true);
  });
  method(app, 'getMyCommands', (req, res, token) => ok(res, commands.get(token) || []));
  method(app, 'deleteMyCommands', (req, res, token) => {
    commands.delete(token);
    ok(res, true);
  });
  // The emulator only echoes topic ids: a new topic just gets a fresh one.
  method(app, 'createForumTopic', (req, res, token, p) => {
    topicId += 1;
    ok(res, { message_thread_id: topicId, name: String(p.name || ''), icon_color: 7322096 });
  });
  // The emulator has no membership model: everyone is a plain member (nobody is an admin).
  method(app, 'getChatMember', (req, res, token, p) => {
    const id = Number(p.user_id);
    ok(res, { status: 'member', user: { id, is_bot: false, first_name: `User ${id}` } });
  });
}

// Gap: unknown methods answer HTTP 500; the real API says 404 in Bot API shape.
function notFound(app) {
  app.all('/bot:token/:method', (req, res) => {
    fail(res, 404, `Not Found: method ${req.params.method} is not emulated`);
  });
}

// Last resort: any other path is a 404, and a handler error or an unparsable body a 400,
// never the stock 500.
function lastResort(app) {
  app.use((req, res) => fail(res, 404, 'Not Found'));
  app.use((err, req, res, _next) => {
    process.stderr.write(`launcher: ${req.method} ${req.path}: ${err && err.stack}\n`);
    fail(res, 400, `Bad Request: ${err && err.message}`);
  });
}

async function main() {
  const arg = process.argv[2] !== undefined ? process.argv[2]
    : (process.env.TELEGRAM_TEST_API_PORT || '0');
  const port = Number(arg);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`launcher: bad port ${JSON.stringify(arg)}\n`);
    process.exit(2);
  }
  const stockUnknown = routes.indexOf(unknownMethod);
  if (stockUnknown < 0) throw new Error('telegram-test-api route list changed: pin 4.2.1');
  routes.splice(stockUnknown, 1, notFound);
  routes.unshift(installCorrections);
  routes.push(lastResort);

  // A day-long store: the stock 60 s would drop messages under a slow test.
  const server = new TelegramServer({ port, host: '127.0.0.1', storeTimeout: 86400 });
  // The stock config turns port 0 into its default 9000; listen where we were told.
  server.config.port = port;
  await server.start();
  const actual = server.server.address().port;
  server.config.port = actual;
  server.config.apiURL = `http://127.0.0.1:${actual}`;
  process.stdout.write(`listening http://127.0.0.1:${actual}\n`);

  const stop = () => process.exit(0);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (fs.fstatSync(0).isFIFO()) {
    process.stdin.on('end', stop).on('error', stop).resume();
  }
}

main().catch((e) => {
  process.stderr.write(`launcher: ${e && e.stack}\n`);
  process.exit(1);
});
