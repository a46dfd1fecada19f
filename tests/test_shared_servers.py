"""The suite's workers share one server of each kind, and the run stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from tests import shared_servers

ROOT = Path(__file__).resolve().parents[1]

# A worker asking for the run's "fake" server: starting one takes a while (as an
# initdb does) and leaves a mark, so two starts would show.
_WORKER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from tests import shared_servers

    def start():
        Path(sys.argv[1], f"started-{os.getpid()}").touch()
        time.sleep(0.5)
        return f"url-of-{os.getpid()}", os.getpid(), sys.argv[1]

    print(shared_servers.shared_server("fake", start, lambda: "own"))
""")


def _config() -> types.SimpleNamespace:
    return types.SimpleNamespace(stash=pytest.Stash())


def test_workers_of_one_run_share_a_server_that_the_run_stops(tmp_path, monkeypatch):
    monkeypatch.delenv(shared_servers.SHARED_DIR_ENV, raising=False)
    config = _config()
    shared_servers.begin_run(config)
    folder = os.environ[shared_servers.SHARED_DIR_ENV]
    stopped: list[tuple[int, str]] = []
    monkeypatch.setitem(shared_servers._STOPS, "fake", lambda pid, data: stopped.append((pid, data)))
    try:
        workers = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path)], cwd=ROOT,
                                    stdout=subprocess.PIPE, text=True) for _ in range(3)]
        urls = {worker.communicate(timeout=60)[0].strip() for worker in workers}
        assert len(urls) == 1 and next(iter(urls)).startswith("url-of-")
        assert len(list(tmp_path.glob("started-*"))) == 1     # one start for the three
        record = json.loads(Path(folder, "fake.json").read_text())
    finally:
        shared_servers.end_run(config)
    assert stopped == [(record["pid"], str(tmp_path))]
    assert not Path(folder).exists()
    assert shared_servers.SHARED_DIR_ENV not in os.environ


def test_a_worker_of_a_run_does_not_make_its_own_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(shared_servers.SHARED_DIR_ENV, str(tmp_path))
    config = _config()
    config.workerinput = {}
    shared_servers.begin_run(config)
    shared_servers.end_run(config)           # only the controller stops servers
    assert os.environ[shared_servers.SHARED_DIR_ENV] == str(tmp_path) and tmp_path.is_dir()


def test_without_a_shared_folder_a_process_starts_its_own(monkeypatch):
    monkeypatch.delenv(shared_servers.SHARED_DIR_ENV, raising=False)
    assert shared_servers.shared_server("fake", lambda: pytest.fail("shared"), lambda: "own") \
        == "own"
