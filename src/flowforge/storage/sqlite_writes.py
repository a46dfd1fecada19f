"""Group commit for SQLite (the shared part: `grouping.py`).

The group commits on the event loop's thread.  A writer thread with its own
connection was tried and measured: SQLite releases Python's GIL for each
row, and taking it back while the loop is busy costs up to a thread switch
interval (5 ms), so 500 concurrent runs took longer, not shorter.  What does
run on a thread is the log's checkpoint, one long call (`wal.py`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from functools import lru_cache
from typing import Callable

from flowforge.errors import StorageError
from flowforge.storage.base import BLOCK_FIELDS, RUN_FIELDS, LeaseLost, conflicting_events
from flowforge.storage.encoding import same_json
from flowforge.storage.grouping import (IDEMPOTENCY_INDEX, Statements, Step, Write,
                                       behind, behind_failed, key_taken, plan, refuse_behind, settle)

__all__ = ["GroupWriter"]

class GroupWriter:
    """Gathers the writes of a loop turn and commits them after the turn."""

    def __init__(self, connection: Callable[[], sqlite3.Connection],
                 notify: Callable[[str], None], committed: Callable[[], None]) -> None:
        """`notify(run_id)` wakes the run's followers; `committed()` after each group."""
        self._connection, self._notify, self._committed = connection, notify, committed
        self._batch: list[Write] = []

    def join(self, write: Write) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        write.future = loop.create_future()
        self._batch.append(write)
        if len(self._batch) == 1:
            loop.call_soon(self._flush)
        return write.future

    def _flush(self) -> None:
        batch, self._batch = self._batch, []
        if not batch:
            return
        try:
            errors = commit_group(self._connection(), batch)
            self._committed()
        except Exception as exc:  # noqa: BLE001 - closed meanwhile: every writer hears it
            errors = [exc] * len(batch)
        settle(batch, errors, self._notify)

    def close(self) -> None:
        """Commit what is gathered now (the storage is closing)."""
        self._flush()


def commit_group(db: sqlite3.Connection, batch: list[Write]) -> list[Exception | None]:
    """Commit `batch` in one transaction; on failure, each write alone (never
    one behind a failed write of its run: `refuse_behind`).  The error of each
    write (None: stored)."""
    errors: list[Exception | None] = [None] * len(batch)
    failed: set = set()
    live = refuse_behind(batch, errors, failed)
    if not live:
        return errors
    try:
        _commit(db, plan(live, _SQL))
        return errors
    except Exception as exc:  # noqa: BLE001 - isolate the failing write
        if len(batch) == 1:
            return [_named(exc, batch[0])]
    for index, write in enumerate(batch):
        if errors[index] is not None:
            continue
        if behind_failed(write, failed):
            errors[index] = behind(write)
            failed.add(write.future)
            continue
        try:
            _commit(db, plan([write], _SQL))
        except Exception as exc:  # noqa: BLE001 - handed to that write's caller
            errors[index] = _named(exc, write)
            failed.add(write.future)
    return errors


#: SQLite names the index's columns, not the index, when it refuses a row.
_KEY_CLASH = "UNIQUE constraint failed: runs.user_id, runs.idempotency_key"
assert IDEMPOTENCY_INDEX == "runs_by_idempotency_key", "update _KEY_CLASH with the index"


def _named(exc: Exception, write: Write) -> Exception:
    """A new run refused by the idempotency index becomes IdempotencyKeyTaken."""
    if isinstance(exc, sqlite3.IntegrityError) and _KEY_CLASH in str(exc):
        return key_taken(write) or exc
    return exc


def _commit(db: sqlite3.Connection, steps: list[Step]) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        for sql, rows, check in steps:
            if sql is _SQL.fence:
                _fence(db, rows)
                continue
            inserted = db.executemany(sql, rows).rowcount
            if check and inserted != len(rows):
                _check_replays(db, rows)
        db.execute("COMMIT")
    except Exception:
        if db.in_transaction:       # (SQLite ends it itself on a full disk: the error stays)
            db.execute("ROLLBACK")
        raise


_SQL = Statements(
    insert_runs=(f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) "
                 f"VALUES ({', '.join('?' * len(RUN_FIELDS))})"),
    insert_events=("INSERT OR IGNORE INTO run_events (run_id, seq, type, block_id, time, data) "
                   "VALUES (?, ?, ?, ?, ?, ?)"),
    upsert_blocks=(
        f"INSERT INTO run_blocks ({', '.join(BLOCK_FIELDS)}) "
        f"VALUES ({', '.join('?' * len(BLOCK_FIELDS))}) "
        f"ON CONFLICT (run_id, scope, block_id) DO UPDATE SET "
        + ", ".join(f"{f} = COALESCE(excluded.{f}, run_blocks.{f})"
                    for f in BLOCK_FIELDS if f not in ("run_id", "scope", "block_id"))),
    fence="UPDATE runs SET lease_expires_at = ? WHERE run_id = ?",
    update_runs=lru_cache(maxsize=64)(
        lambda names: f"UPDATE runs SET {', '.join(f'{n} = ?' for n in names)} WHERE run_id = ?"))


def _fence(db: sqlite3.Connection, rows: list[list]) -> None:
    """LeaseLost unless each run's lease is still its writer's (`grouping.fence_rows`);
    a lease running out is extended.  The transaction holds the database's write
    lock, so no claim can come between the check and the commit.  Only the rows
    that are not as expected are returned (a process's writes share one owner),
    read from an index (migration 0016): a row, or a statement, per write cost
    as much as the write."""
    by_owner: dict[tuple[str, float, float], list[str]] = {}
    for run_id, owner, until, below in rows:
        by_owner.setdefault((owner, until, below), []).append(run_id)
    for (owner, until, below), ids in by_owner.items():
        for start in range(0, len(ids), 500):          # SQLite's limit on parameters
            part = ids[start:start + 500]
            odd = db.execute(f"SELECT run_id, lease_owner FROM runs INDEXED BY runs_by_lease "
                             f"WHERE run_id IN "
                             f"({', '.join('?' * len(part))}) AND (lease_owner IS NOT ? OR "
                             f"lease_expires_at IS NULL OR lease_expires_at < ?)",
                             (*part, owner, below)).fetchall()
            for run_id, held in odd:
                if held != owner:
                    raise LeaseLost(run_id, owner)
            if odd:
                db.executemany(_SQL.fence, [(until, run_id) for run_id, _ in odd])


def _check_replays(db: sqlite3.Connection, events: list[tuple]) -> None:
    """A replay of stored events is fine; another event under a stored seq is
    two processes writing one run: an error, never silently dropped."""
    by_run: dict[str, list[tuple]] = {}
    for row in events:
        by_run.setdefault(row[0], []).append(row)
    for run_id, rows in by_run.items():
        marks = ", ".join("?" * len(rows))
        stored = dict(db.execute(
            f"SELECT seq, data FROM run_events WHERE run_id = ? AND seq IN ({marks})",
            (run_id, *(r[1] for r in rows))).fetchall())
        clash = [r[1] for r in rows if r[1] in stored and not same_json(stored[r[1]], r[5])]
        if clash:
            raise StorageError(conflicting_events(run_id, clash))
