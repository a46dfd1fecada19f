"""One throwaway server of each kind per test run, shared by every pytest worker.

`make test` runs the suite on several workers (`-n auto`); each used to start
its own PostgreSQL and its own PostgreSQL with pgvector the first time one of
its tests needed one: an `initdb` and a start each (~1.8 s of wall, ~0.7 s of
CPU in our own processes, more in the server's), repeated on every worker.
Tests never share rows (each takes a schema of its own, `temporary_schema`),
so one server of each kind serves the whole run.

The run's controller (the process pytest was started as) makes a folder and
names it in `FLOWFORGE_TEST_SHARED_DIR` before the workers start, so they
inherit it.  The first worker that needs a server starts it under a file lock
and writes its URL, PID and data folder there; the others read them.  The
controller stops every server recorded there when the run ends
(`pytest_unconfigure`), whichever worker started it: a worker that ends, or
dies, early does not take a server from the others.  A process without that
variable (a test file imported outside pytest) starts its own, as before.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import pytest

__all__ = ["SHARED_DIR_ENV", "begin_run", "end_run", "shared_server", "postgres_url",
           "pgvector_url"]

SHARED_DIR_ENV = "FLOWFORGE_TEST_SHARED_DIR"
_FOLDER = pytest.StashKey[str]()


def begin_run(config) -> None:
    """In the controller: the folder the workers share (they inherit the variable)."""
    if hasattr(config, "workerinput") or os.environ.get(SHARED_DIR_ENV):
        return
    folder = tempfile.mkdtemp(prefix="flowforge-test-servers-")
    os.environ[SHARED_DIR_ENV] = folder
    config.stash[_FOLDER] = folder


def end_run(config) -> None:
    """In the controller: stop every server a worker recorded, delete the folder."""
    folder = config.stash.get(_FOLDER, None)
    if folder is None:
        return
    for record in sorted(Path(folder).glob("*.json")):
        server = json.loads(record.read_text(encoding="utf-8"))
        _STOPS[server["kind"]](server["pid"], server["folder"])
    shutil.rmtree(folder, ignore_errors=True)
    os.environ.pop(SHARED_DIR_ENV, None)


def shared_server(kind: str, start: Callable[[], tuple[str, int, str]],
                  own: Callable[[], str]) -> str:
    """The URL of the run's server of `kind` (`start()`: url, pid, folder of a new
    one); `own()` outside a run that shares servers."""
    folder = os.environ.get(SHARED_DIR_ENV)
    if not folder or not Path(folder).is_dir():
        return own()
    with open(Path(folder, f"{kind}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one worker starts it, the others wait
        record = Path(folder, f"{kind}.json")
        if record.exists():
            return json.loads(record.read_text(encoding="utf-8"))["url"]
        url, pid, data = start()
        record.write_text(json.dumps({"kind": kind, "url": url, "pid": pid, "folder": data}),
                          encoding="utf-8")
        return url


def _stop_postgres(pid: int, folder: str) -> None:
    from flowforge.storage.testing import stop_server
    stop_server(pid, folder, "flowforge-pg-")


_STOPS: dict[str, Callable[[int, str], None]] = {
    "postgres": _stop_postgres,
    "pgvector": _stop_postgres,      # pgvector_server's folders start "flowforge-pg-" too
}


def postgres_url() -> str:
    """The run's PostgreSQL (`FLOWFORGE_TEST_POSTGRES_URL` wins)."""
    from flowforge.storage import testing

    def start() -> tuple[str, int, str]:
        server = testing.start()
        return server.url, server.pid, server.folder

    return os.environ.get("FLOWFORGE_TEST_POSTGRES_URL") or \
        shared_server("postgres", start, testing.shared_url)


def pgvector_url() -> str:
    """The run's PostgreSQL with pgvector (`FLOWFORGE_TEST_PGVECTOR_URL` wins)."""
    from tests.script_modules import script

    module = script("pgvector_server")
    return os.environ.get(module.ENV_URL) or \
        shared_server("pgvector", module.start, module.shared_url)
