"""A server on 127.0.0.1 that answers a POST with the Authorization header it
received: the credential field a test's secret goes into (secrets are
sink-only, issue 23) and a way to see that the value arrived."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"auth": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def echo_server() -> Iterator[str]:
    """The server's URL while the block runs."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/echo"
    finally:
        httpd.shutdown()
        httpd.server_close()


def sending(block_id: str, url: str, authorization: str) -> dict:
    """An `http` block that sends `authorization` (a template) to `url`."""
    return {"id": block_id, "type": "http",
            "with": {"url": url, "method": "POST", "allow_private_network": True,
                     "headers": {"Authorization": authorization}}}
