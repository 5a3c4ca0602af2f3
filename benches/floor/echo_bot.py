#!/usr/bin/env python3
"""The floor of benches/floor.rs: a minimal Telegram long-polling bot with no store.

It polls getUpdates (timeout 1 s, like chela's bench config) and answers every text
message with "ok: <text>" through sendMessage, from WORKERS threads, each with its own
kept-alive connection. Nothing is stored, nothing is retried: the least a bot can do.

Usage: echo_bot.py API_URL TOKEN WORKERS   (stdlib only; stops on SIGTERM)
"""

import http.client
import json
import queue
import signal
import sys
import threading
import urllib.parse


def connection(api_url):
    """A kept-alive HTTP connection to the API's host."""
    url = urllib.parse.urlsplit(api_url)
    return http.client.HTTPConnection(url.hostname, url.port, timeout=30)


def call(conn, path, params):
    """POSTs params as JSON to path; the decoded answer."""
    body = json.dumps(params).encode()
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    return json.loads(conn.getresponse().read())


def worker(api_url, base, jobs):
    """Sends the answers queued in jobs."""
    conn = connection(api_url)
    while True:
        chat_id, text = jobs.get()
        call(conn, base + "/sendMessage", {"chat_id": chat_id, "text": "ok: " + text})


def main():
    api_url, token, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    base = urllib.parse.urlsplit(api_url).path.rstrip("/") + "/bot" + token
    jobs = queue.SimpleQueue()
    for _ in range(workers):
        threading.Thread(target=worker, args=(api_url, base, jobs), daemon=True).start()
    conn = connection(api_url)
    offset = 0
    while True:
        answer = call(conn, base + "/getUpdates", {"offset": offset, "timeout": 1})
        for update in answer.get("result", []):
            offset = update["update_id"] + 1
            message = update.get("message") or {}
            if "text" in message:
                jobs.put((message["chat"]["id"], message["text"]))


if __name__ == "__main__":
    main()
