"""How long a write waits for another process holding a SQLite file's lock:
FLOWFORGE_SQLITE_BUSY_SECONDS (10 s unless set), then "database is locked"
(docs/guides/troubleshooting.md); a value that is not a number of seconds
is refused in one line naming the variable."""

from __future__ import annotations

import sqlite3
import time

import pytest

from flowforge.errors import StorageError
from flowforge.storage import storage_from_url


def _run(run_id: str) -> dict:
    return {"run_id": run_id, "workflow_id": "wf", "status": "running",
            "created_at": time.time()}


async def test_a_write_gives_up_after_the_busy_seconds_set(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    storage = storage_from_url(url)
    await storage.open()                       # made and migrated while nobody holds it
    monkeypatch.setenv("FLOWFORGE_SQLITE_BUSY_SECONDS", "0.5")
    other = storage_from_url(url)
    await other.open()
    holder = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")          # another process's write in progress
    started = time.monotonic()
    try:
        with pytest.raises(StorageError, match="database is locked"):
            await other.create_run(_run("r1"))
        waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        await other.close()
        await storage.close()
    assert 0.4 < waited < 5, waited            # not the default's 10 s


async def test_a_busy_time_that_is_not_seconds_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SQLITE_BUSY_SECONDS", "soon")
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    with pytest.raises(StorageError, match="FLOWFORGE_SQLITE_BUSY_SECONDS='soon' is not a "
                                           "number of seconds.*=10"):
        await storage.open()


async def test_a_new_file_another_process_holds_is_locked_not_read_only(tmp_path,
                                                                       monkeypatch):
    """While another process holds a fresh file, opening it waited for nothing
    and said the file was read-only and lacked its schema."""
    monkeypatch.setenv("FLOWFORGE_SQLITE_BUSY_SECONDS", "0.3")
    holder = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        with pytest.raises(StorageError) as caught:
            await storage.open()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "database is locked by another process (waited 0.3 s)" in str(caught.value)
    assert "FLOWFORGE_SQLITE_BUSY_SECONDS" in str(caught.value)
    assert "read-only" not in str(caught.value)
    await storage.open()                       # once it is let go, it opens and migrates
    await storage.create_run(_run("r1"))
    await storage.close()
