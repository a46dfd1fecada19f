"""For the prompt-chain tests: where the example lives, and a local HTTP receiver
for event nodes that records every request and answers as told (import the
`receiver` fixture into a test module to use it)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "chains"


class Receiver:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.status = 200
        self.url = ""


@pytest.fixture
def receiver():
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            state.requests.append({"method": self.command, "path": self.path,
                                   "body": json.loads(body) if body else None})
            payload = json.dumps({"ok": state.status < 400}).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_POST = do_PUT = do_GET = _answer

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
