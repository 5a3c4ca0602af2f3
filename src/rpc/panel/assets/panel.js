// chela control panel: the live run feed (Server-Sent Events from /panel/events) and a
// confirmation before operator actions. Every text goes in with textContent, never as HTML.
(function () {
  "use strict";

  document.querySelectorAll("form[action='/panel/pairing/reject'], form[action='/panel/bindings/close']")
    .forEach(function (form) {
      form.addEventListener("submit", function (e) {
        if (!window.confirm("Sure?")) { e.preventDefault(); }
      });
    });

  var runs = document.getElementById("runs");
  if (!runs) { return; }
  var state = document.getElementById("feed-state");
  var session = runs.getAttribute("data-session") || "";
  var url = "/panel/events" + (session ? "?session=" + encodeURIComponent(session) : "");
  var cards = {};
  // The most runs kept on the page: the oldest cards go first.
  var MAX_CARDS = 50;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function card(runId, key) {
    var c = cards[runId];
    if (c) { return c; }
    var box = el("div", "run");
    box.setAttribute("data-run", runId);
    var head = el("div", "head");
    var link = el("a", null, key);
    link.href = "/panel/session?key=" + encodeURIComponent(key);
    var phase = el("span", "phase", "running");
    head.appendChild(document.createTextNode(runId + " · "));
    head.appendChild(link);
    head.appendChild(document.createTextNode(" · "));
    head.appendChild(phase);
    var text = el("div", "text");
    var tools = el("div", "tools");
    box.appendChild(head);
    box.appendChild(tools);
    box.appendChild(text);
    runs.insertBefore(box, runs.firstChild);
    c = { box: box, phase: phase, text: text, tools: tools };
    cards[runId] = c;
    while (runs.children.length > MAX_CARDS) {
      var last = runs.lastChild;
      delete cards[last.getAttribute("data-run")];
      runs.removeChild(last);
    }
    return c;
  }

  var source = new EventSource(url);
  source.onopen = function () { state.textContent = "Live: new runs appear here as they happen."; };
  source.onerror = function () { state.textContent = "Disconnected; retrying…"; };
  source.addEventListener("agent", function (e) {
    var ev = JSON.parse(e.data);
    var c = card(ev.runId, ev.session);
    if (ev.stream === "assistant") {
      c.text.textContent += ev.delta || "";
    } else if (ev.stream === "tool") {
      var line = (ev.phase === "start" ? "→ " : "← ") + ev.name + (ev.phase === "end" && ev.is_error ? " (error)" : "");
      c.tools.appendChild(el("div", "tool", line));
    } else if (ev.stream === "lifecycle" && ev.phase === "error") {
      c.phase.textContent = "failed: " + ev.message;
      c.box.classList.add("failed");
    } else if (ev.stream === "compaction") {
      c.tools.appendChild(el("div", "tool", "compacted"));
    }
  });
  source.addEventListener("lagged", function (e) {
    state.textContent = "Missed " + e.data + " events (the page fell behind); texts may have gaps.";
  });
  source.addEventListener("run", function (e) {
    var r = JSON.parse(e.data);
    var c = card(r.runId, r.session);
    c.phase.textContent = r.status;
    c.box.classList.add(r.status === "ok" ? "finished" : "failed");
    if (r.text && !c.text.textContent) { c.text.textContent = r.text; }
  });
})();
