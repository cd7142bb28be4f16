"""A local server speaking the OpenAI chat completions API, for the judge's tests.

What it answers depends on a word in the decision it is asked about (its chosen_option):
KEEP and BROKEN a verdict (BREAK-<name>: broken for that invariant only), FENCED a
verdict inside a ``` fence, SLOW an answer after `slow_seconds`, FAIL500 an HTTP 500,
GARBAGE prose instead of JSON, NOTJSON a body that is not JSON, REFUSE a refusal, HUGE
an answer over the size bound; anything else "kept". Every request is kept for the test
to read (headers and body).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def _completion(content: str | None, refusal: str | None = None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": "judge",
                       "choices": [{"index": 0, "message": message,
                                    "finish_reason": "stop"}]}).encode()


def _verdict(word: str) -> str:
    return json.dumps({"verdict": word, "reason": f"the decision is {word}"})


@dataclass
class JudgeServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    slow_seconds: float = 3.0

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes]:
        case = body["messages"][-1]["content"]
        name = json.loads(case)["invariant"]["name"]
        if f"BREAK-{name}" in case:
            return 200, _completion(_verdict("broken"))
        for marker, reply in (
                ("FENCED", lambda: (200, _completion(f"```json\n{_verdict('broken')}\n```"))),
                ("BROKEN", lambda: (200, _completion(_verdict("broken")))),
                ("FAIL500", lambda: (500, b'{"error": "overloaded"}')),
                ("GARBAGE", lambda: (200, _completion("I think this is probably fine."))),
                ("NOTJSON", lambda: (200, b"<html>bad gateway</html>")),
                ("REFUSE", lambda: (200, _completion(None, "I can't help with that."))),
                ("HUGE", lambda: (200, _completion("x" * 100_000)))):
            if marker in case:
                return reply()
        if "SLOW" in case:
            time.sleep(self.slow_seconds)
        return 200, _completion(_verdict("kept"))


def serve() -> tuple[ThreadingHTTPServer, JudgeServer]:
    holder: list[JudgeServer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
            server = holder[0]
            server.requests.append({"path": self.path, "headers": dict(self.headers),
                                    "body": body})
            status, data = server.answer(body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (a timeout test)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    holder.append(JudgeServer(f"http://127.0.0.1:{httpd.server_address[1]}"))
    return httpd, holder[0]


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    httpd, server = serve()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
