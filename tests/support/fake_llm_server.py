#!/usr/bin/env python3
"""A scripted stand-in for an LLM provider, for tests (Python 3 standard library only).

    python3 tests/support/fake_llm_server.py --script SCRIPT.json --log REQUESTS.jsonl \
        [--port 0] [--host 127.0.0.1] [--expect-key KEY] [--watch-stdin]

The first line on stdout is "PORT <n>" (the port it listens on; --port 0 picks a free one).
It then serves, on any path prefix, threaded:

    POST .../chat/completions   the OpenAI chat-completions format
    POST .../messages           the Anthropic messages format
    GET  .../models             {"object": "list", "data": [{"id": "fake-model", ...}]}
    GET  /health                "ok"

The script is JSON:

    {"mode": "sequence" | "match",
     "responses": [
       {"match": "substring of the last user message (match mode; absent: matches anything)",
        "text": "the assistant's answer",
        "status": 200,            # HTTP status; non-2xx sends an error body in the API's format
        "delay_s": 0,             # sleep before answering (time-out tests)
        "retry_after": null,      # a Retry-After header value (number or string)
        "drop": false,            # close the connection without answering
        "truncate": false,        # send the first half of the JSON (a complete HTTP answer
                                  #   whose Content-Length matches the half: malformed JSON)
        "error_body": null,       # the body of a non-2xx answer: an object (sent as JSON) or
                                  #   a string (sent as is); null: {"error": {"message": ...}}
        "raw_body": null,         # send this string as the body verbatim, whatever the status
        "finish_reason": null,    # default "stop" (OpenAI) / "end_turn" (Anthropic)
        "usage": {"input": 100, "output": 50},   # null: no usage in the answer
        "headers": {},            # extra response headers
        "times": 1}]}             # sequence mode: this entry answers that many requests

In sequence mode the entries are consumed in order; once they are used up every request gets
HTTP 500 "fake server: script exhausted". In match mode the first entry whose "match" occurs in
the last user message answers (entries are reused); none matching gives HTTP 400.

Every request is appended to the log (one JSON object per line, flushed at once, written before
the answer so dropped and timed-out requests are logged too):

    {"n": 1, "time": 1700000000.0, "method": "POST", "path": "/v1/chat/completions",
     "api": "openai" | "anthropic" | null,
     "headers": {lower-cased names: values; authorization and x-api-key as "<redacted:LEN>"},
     "auth_header": "authorization" | "x-api-key" | null,
     "auth_matches_expected_key": true | false | null,   # "Bearer KEY" / KEY vs --expect-key
     "body": the parsed JSON body (or the raw text when it is not JSON),
     "response_index": index of the script entry that answered, or null}

With --watch-stdin the server exits when its stdin reaches end of file, so a test that dies
does not leave it running.
"""

import argparse
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AUTH_HEADERS = ("authorization", "x-api-key")


class Script:
    def __init__(self, doc):
        if not isinstance(doc, dict) or not isinstance(doc.get("responses"), list):
            raise ValueError('the script must be {"mode": ..., "responses": [...]}')
        self.mode = doc.get("mode", "sequence")
        if self.mode not in ("sequence", "match"):
            raise ValueError("mode must be sequence or match")
        self.responses = doc["responses"]
        self.lock = threading.Lock()
        self.position = 0  # sequence mode: the entry answering next
        self.used = 0  # ... and how many requests it has answered

    def pick(self, last_user):
        """(index, entry), or (None, None) when nothing answers."""
        with self.lock:
            if self.mode == "match":
                for i, entry in enumerate(self.responses):
                    if entry.get("match") is None or entry["match"] in last_user:
                        return i, entry
                return None, None
            while self.position < len(self.responses):
                entry = self.responses[self.position]
                if self.used < int(entry.get("times", 1)):
                    self.used += 1
                    return self.position, entry
                self.position += 1
                self.used = 0
            return None, None


def text_of(content):
    """A message's text: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def last_user_message(body):
    if not isinstance(body, dict):
        return ""
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            return text_of(m.get("content"))
    return ""


def openai_answer(entry, body, n):
    usage = entry.get("usage", {"input": 100, "output": 50})
    doc = {
        "id": "chatcmpl-fake-%d" % n,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": (body or {}).get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": entry.get("text", "")},
                "finish_reason": entry.get("finish_reason") or "stop",
            }
        ],
    }
    if usage is not None:
        doc["usage"] = {
            "prompt_tokens": usage.get("input", 0),
            "completion_tokens": usage.get("output", 0),
            "total_tokens": usage.get("input", 0) + usage.get("output", 0),
        }
    return doc


def anthropic_answer(entry, body, n):
    usage = entry.get("usage", {"input": 100, "output": 50})
    doc = {
        "id": "msg_fake_%d" % n,
        "type": "message",
        "role": "assistant",
        "model": (body or {}).get("model", "fake-model"),
        "content": [{"type": "text", "text": entry.get("text", "")}],
        "stop_reason": entry.get("finish_reason") or "end_turn",
        "stop_sequence": None,
    }
    if usage is not None:
        doc["usage"] = {"input_tokens": usage.get("input", 0), "output_tokens": usage.get("output", 0)}
    return doc


def error_answer(api, status, message):
    if api == "anthropic":
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error", "code": status}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1"

    def log_message(self, fmt, *args):  # keep stderr quiet
        pass

    def _send(self, status, body_bytes, extra_headers=None, content_type="application/json"):
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body_bytes)))
            self.send_header("Connection", "close")
            for k, v in (extra_headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(body_bytes)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its time-out)
        self.close_connection = True

    def do_GET(self):
        if self.path == "/health":
            self._send(200, b"ok", content_type="text/plain")
        elif self.path.rstrip("/").endswith("/models"):
            doc = {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}]}
            self._send(200, json.dumps(doc).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self):
        srv = self.server
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0].rstrip("/")
        api = "openai" if path.endswith("/chat/completions") else "anthropic" if path.endswith("/messages") else None

        index, entry = (None, None)
        if api is not None and isinstance(body, dict):
            index, entry = srv.script.pick(last_user_message(body))
        n = srv.log_request(self.command, self.path, api, self.headers, body, index)

        if api is None:
            self._send(404, json.dumps(error_answer(None, 404, "fake server: unknown path " + path)).encode())
            return
        if not isinstance(body, dict):
            self._send(400, json.dumps(error_answer(api, 400, "fake server: the body is not a JSON object")).encode())
            return
        if entry is None:
            if srv.script.mode == "match":
                self._send(
                    400, json.dumps(error_answer(api, 400, "fake server: no scripted response matches")).encode()
                )
            else:
                self._send(500, json.dumps(error_answer(api, 500, "fake server: script exhausted")).encode())
            return

        if entry.get("delay_s"):
            time.sleep(float(entry["delay_s"]))
        if entry.get("drop"):
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.close_connection = True
            return

        status = int(entry.get("status", 200))
        headers = dict(entry.get("headers") or {})
        if entry.get("retry_after") is not None:
            headers["Retry-After"] = entry["retry_after"]
        if entry.get("raw_body") is not None:
            payload = entry["raw_body"].encode()
        elif 200 <= status < 300:
            doc = anthropic_answer(entry, body, n) if api == "anthropic" else openai_answer(entry, body, n)
            payload = json.dumps(doc).encode()
        else:
            eb = entry.get("error_body")
            if eb is None:
                payload = json.dumps(error_answer(api, status, "fake error %d" % status)).encode()
            elif isinstance(eb, str):
                payload = eb.encode()
            else:
                payload = json.dumps(eb).encode()
        if entry.get("truncate"):
            payload = payload[: len(payload) // 2]
        self._send(status, payload, headers)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, script, log_path, expect_key):
        super().__init__(addr, Handler)
        self.script = script
        self.log_path = log_path
        self.expect_key = expect_key
        self.log_lock = threading.Lock()
        self.count = 0

    def log_request(self, method, path, api, headers, body, index):
        shown = {}
        auth_header, matches = None, None
        for name, value in headers.items():
            lname = name.lower()
            if lname in AUTH_HEADERS:
                auth_header = lname
                presented = (
                    value[len("Bearer ") :] if lname == "authorization" and value.startswith("Bearer ") else value
                )
                matches = self.expect_key is not None and presented == self.expect_key
                shown[lname] = "<redacted:%d>" % len(value)
            else:
                shown[lname] = value
        with self.log_lock:
            self.count += 1
            entry = {
                "n": self.count,
                "time": time.time(),
                "method": method,
                "path": path,
                "api": api,
                "headers": shown,
                "auth_header": auth_header,
                "auth_matches_expected_key": matches,
                "body": body,
                "response_index": index,
            }
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")
                    f.flush()
            return self.count


def main():
    ap = argparse.ArgumentParser(description="A scripted fake LLM server (OpenAI and Anthropic formats).")
    ap.add_argument("--script", required=True, help="the script (JSON file)")
    ap.add_argument("--log", default="", help="append every request here (JSON Lines)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--expect-key", default=None, help="the API key the log compares presented keys with")
    ap.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches end of file")
    args = ap.parse_args()

    with open(args.script, encoding="utf-8") as f:
        script = Script(json.load(f))
    serve(Server((args.host, args.port), script, args.log, args.expect_key), args.watch_stdin)


def serve(server, watch_stdin):
    """Prints the port, then serves until interrupted or, with watch_stdin, until stdin closes (the
    test that started the server has gone)."""
    print("PORT %d" % server.server_address[1], flush=True)
    if watch_stdin:

        def watch():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except OSError:
                pass
            server.shutdown()

        threading.Thread(target=watch, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    server.server_close()


if __name__ == "__main__":
    main()
