"""The helper that starts `flowforge serve` processes for the tests: a server
that another process beat to its port is told apart from one that answers."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.ports import listens
from tests.server.conftest import PortTaken, wait_healthy

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")


class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_server_beaten_to_its_port_is_not_taken_for_healthy(tmp_path):
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    port = other.server_address[1]
    threading.Thread(target=other.serve_forever, daemon=True).start()
    env = {**os.environ, "FLOWFORGE_SECRET_KEY_FILE": str(tmp_path / "secret.key")}
    process = subprocess.Popen([FLOWFORGE, "serve", "--port", str(port), "--db",
                                f"sqlite:///{tmp_path / 'db.sqlite'}"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        assert listens(os.getpid(), port)          # the other server: this process
        assert not listens(process.pid, port)
        with pytest.raises(PortTaken, match="already in use"):
            wait_healthy(process, f"http://127.0.0.1:{port}")
    finally:
        other.shutdown()
        other.server_close()
        if process.poll() is None:
            process.kill()
        process.wait(10)
