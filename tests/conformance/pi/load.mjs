// Loads a session file with pi's own SessionManager and prints what pi would send the model:
// {"version", "entries", "messages": [{"role", "text"}]}. Exit 1 when pi cannot load it.
import { SessionManager } from "@mariozechner/pi-coding-agent";

const sm = SessionManager.open(process.argv[2]);
const context = sm.buildSessionContext();
const text = (content) =>
  typeof content === "string"
    ? content
    : content.filter((b) => b.type === "text").map((b) => b.text).join("");
console.log(JSON.stringify({
  version: sm.getHeader()?.version,
  entries: sm.getEntries().length,
  messages: context.messages.map((m) => ({ role: m.role, text: text(m.content), api: m.api, usage: m.usage })),
}));
