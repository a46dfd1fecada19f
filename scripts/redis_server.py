"""A throwaway Redis server on 127.0.0.1 for tests and benchmarks (the worker
pool's broker): started on a free port with no persistence, stopped by PID.

    with RedisServer() as redis: redis.url      # redis://127.0.0.1:PORT/0
    redis.restart()                             # kill -9, then again on the same port

A restart loses every message (no persistence), as a broker that restarted
empty: what the worker pool must survive.

Debian's redis-server is installed by scripts/install_system_deps.sh.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time

__all__ = ["RedisServer", "free_port"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, port: int | None = None, startup_timeout: float = 20.0) -> None:
        self.port = port or free_port()
        self.chosen = port is not None      # else another free port when this one is taken
        self.started = False                # (a restart stays on its port: clients know it)
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.folder = tempfile.mkdtemp(prefix="flowforge-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        """Start on the port (after a restart: the same one).  A port found free is
        free only until someone binds it: a server that exits at once because
        another process took it is started again on another free port, unless
        the caller chose the port; the server that answers must be this one
        (its `process_id`), never another test's on the same port."""
        for _ in range(3):
            if self._start_once():
                self.started = True
                return self
            if self.chosen or self.started or self.process is None or \
                    self.process.poll() is None:
                break
            self.port = free_port()
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def _start_once(self) -> bool:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.folder, "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"INFO server\r\n")
                    said = b""
                    while b"process_id:" not in said or not said.endswith(b"\r\n"):
                        part = conn.recv(65536)
                        if not part:
                            break
                        said += part
                    if f"process_id:{self.process.pid}\r\n".encode() in said:
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def kill(self) -> None:
        """kill -9 the server (a crash): it is gone, with every message it held."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self, down: float = 0.0) -> "RedisServer":
        """kill -9, stay down `down` seconds, start again on the same port."""
        self.kill()
        time.sleep(down)
        return self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
