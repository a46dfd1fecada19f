"""The worker pool for real: Debian's redis-server on a free loopback port (one per
session, stopped by PID), `flowforge worker` processes started per test on a
queue of their own, and a SQLite run database they share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.script_modules import script

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = str(Path(__file__).with_name("plugin.py"))


def _redis_module():
    return script("redis_server")


@pytest.fixture(scope="session")
def redis_url():
    with _redis_module().RedisServer() as server:
        yield server.url


class Pool:
    """Workers on one queue; `start()` one more, `kill(worker)` as a machine loss."""

    def __init__(self, broker: str, database: str, folder: Path) -> None:
        self.broker, self.database, self.folder = broker, database, folder
        self.queue = f"test-{uuid.uuid4().hex[:8]}"
        self.workers: list[subprocess.Popen] = []
        self.env = {**os.environ, "FLOWFORGE_DATABASE_URL": database,
                    "FLOWFORGE_BROKER_URL": broker, "FLOWFORGE_LEASE_SECONDS": "3",
                    "FLOWFORGE_QUEUE": self.queue,
                    "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{folder / 'kb.db'}"}

    def start(self, concurrency: int = 1, processes: int = 1,
              options: tuple[str, ...] = ()) -> subprocess.Popen:
        """One more `flowforge worker`: `processes` processes running up to
        `concurrency` runs at once each."""
        log = open(self.folder / f"worker-{len(self.workers)}.log", "w")
        worker = subprocess.Popen(
            [sys.executable, "-m", "flowforge.cli.main", "worker", "--concurrency",
             str(concurrency), "--processes", str(processes), "--queues", self.queue,
             "--import", PLUGIN, "--loglevel", "info", *options],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.workers.append(worker)
        return worker

    def wait_ready(self, worker: subprocess.Popen, processes: int = 1,
                   timeout: float = 60.0) -> None:
        """Until `processes` Celery workers of `worker` say they are ready (log line)."""
        import time

        log = self.folder / f"worker-{self.workers.index(worker)}.log"
        deadline = time.monotonic() + timeout
        while log.read_text().count(" ready.") < processes:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            assert worker.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)

    def kill(self, worker: subprocess.Popen) -> None:
        """kill -9 the worker and its pool processes at once (a lost machine)."""
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.wait(10)

    def stop(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                try:
                    os.killpg(worker.pid, signal.SIGTERM)
                    worker.wait(10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    self.kill(worker)


@pytest.fixture
def pool(redis_url, tmp_path, monkeypatch):
    database = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("FLOWFORGE_BROKER_URL", redis_url)
    live = Pool(redis_url, database, tmp_path)
    monkeypatch.setenv("FLOWFORGE_QUEUE", live.queue)     # runs this test enqueues go to it
    yield live
    live.stop()
