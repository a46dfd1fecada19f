"""Group commit for SQLite (the shared part: `grouping.py`).

The group commits on the event loop's thread.  A writer thread with its own
connection was tried and measured: SQLite releases Python's GIL for each
row, and taking it back while the loop is busy costs up to a thread switch
interval (5 ms), so 500 concurrent runs took longer, not shorter.  What does
run on a thread is the log's checkpoint, one long call (`wal.py`).

Several processes on one file (a worker pool's) take turns at its write
lock.  A statement that finds it taken sleeps in SQLite's busy handler (1,
2, 5, 10 ... ms), and on the loop's thread that sleep held up every run of
the process: measured with 4 worker processes, most of a commit's time was
that wait.  So a group takes the lock without waiting (`take_write_lock`)
and, when another process holds it, tries again a moment later while the
loop goes on; a group kept out for the busy time fails as a statement that
waited that long does ("database is locked").
"""

from __future__ import annotations

import asyncio
import sqlite3
from functools import lru_cache
from typing import Callable

from flowforge.errors import StorageError
from flowforge.storage import seconds_setting
from flowforge.storage.base import BLOCK_FIELDS, RUN_FIELDS, LeaseLost, conflicting_events
from flowforge.storage.encoding import dumps_utf8_each, same_json
from flowforge.storage.grouping import (IDEMPOTENCY_INDEX, Statements, Step, Write,
                                       WriteFuture, behind, behind_failed, first_group,
                                       key_taken, plan, refuse_behind, settle, split_group)

__all__ = ["GroupWriter", "BUSY_ENV", "BUSY_SECONDS", "LOCK_RETRY", "busy_seconds",
           "take_write_lock"]

#: FLOWFORGE_SQLITE_BUSY_SECONDS: how long a write waits for another process's lock,
#: else 10 s (read when a database is opened).
BUSY_SECONDS = 10.0
BUSY_ENV = "FLOWFORGE_SQLITE_BUSY_SECONDS"


def busy_seconds() -> float:
    """FLOWFORGE_SQLITE_BUSY_SECONDS, checked (StorageError naming the fix)."""
    return seconds_setting(BUSY_ENV, BUSY_SECONDS, "a write waits for another process to "
                                                   "release a SQLite file's lock")


#: Most bytes of events one group commits; the rest commit on the next loop turns,
#: in order, so that other work (a `/health`, another run's step) runs between.
GROUP_BYTES = 2_000_000

class GroupWriter:
    """Gathers the writes of a loop turn and commits them after the turn."""

    def __init__(self, connection: Callable[[], sqlite3.Connection],
                 notify: Callable[[str], None], committed: Callable[[], None]) -> None:
        """`notify(run_id)` wakes the run's followers; `committed()` after each group."""
        self._connection, self._notify, self._committed = connection, notify, committed
        self._batch: list[Write] = []
        self._waiting: asyncio.TimerHandle | None = None   # for the lock, another try
        self.busy = BUSY_SECONDS                            # the store's, once it opened
        self._since: float | None = None                   # kept out of the lock since

    def join(self, write: Write) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        write.future = WriteFuture(loop=loop)
        self._batch.append(write)
        if len(self._batch) == 1:
            loop.call_soon(self._flush)
        return write.future

    def _flush(self, wait: bool = False) -> None:
        """Commit the gathered writes (and those that joined them while they
        waited for the lock, in order); `wait`: in SQLite's busy handler."""
        self._waiting = None
        batch, self._batch = self._batch, []
        if not batch:
            return
        begun = False
        try:
            db = self._connection()
            if not wait:
                refused = take_write_lock(db)
                if refused is not None:
                    loop = asyncio.get_running_loop()
                    now = loop.time()
                    self._since = now if self._since is None else self._since
                    if now - self._since < self.busy:
                        self._batch = batch     # (empty meanwhile: nothing ran since)
                        self._waiting = loop.call_later(LOCK_RETRY, self._flush)
                        return
                    raise refused
                begun = True
            self._since = None
            taken, size = first_group(batch, GROUP_BYTES, _SQL.encode)
            if size >= GROUP_BYTES:     # (else every write fits: no split to look for)
                group, left = split_group(batch[:taken], GROUP_BYTES, _SQL.encode)
                later = ([left] if left is not None else []) + batch[taken:]
                if later:               # the next group, on the next loop turn
                    batch, self._batch = group, later + self._batch
            errors = commit_group(db, batch, begun=begun)
            self._committed()
        except Exception as exc:  # noqa: BLE001 - closed meanwhile: every writer hears it
            self._since = None
            errors = [exc] * len(batch)
            if begun and self._in_transaction():
                self._connection().execute("ROLLBACK")     # never hold the lock after
        settle(batch, errors, self._notify)
        if self._batch and self._waiting is None and not wait:
            asyncio.get_running_loop().call_soon(self._flush)     # the rest, next turn

    def _in_transaction(self) -> bool:
        try:
            return self._connection().in_transaction
        except Exception:  # noqa: BLE001 - closed: nothing is held
            return False

    def close(self) -> None:
        """Commit what is gathered now (the storage is closing)."""
        if self._waiting is not None:
            self._waiting.cancel()
        while self._batch:
            self._flush(wait=True)


#: Seconds between two tries at a write lock another process holds.
LOCK_RETRY = 0.001
_BUSY = 5                   # SQLITE_BUSY (extended codes keep it in the low byte)


def take_write_lock(db: sqlite3.Connection) -> sqlite3.OperationalError | None:
    """Begin a write transaction if no other process holds the file's write
    lock, without waiting: None when begun, else SQLite's "database is
    locked" (any other error is raised)."""
    (timeout,) = db.execute("PRAGMA busy_timeout").fetchone()
    db.execute("PRAGMA busy_timeout=0")
    try:
        db.execute("BEGIN IMMEDIATE")
        return None
    except sqlite3.OperationalError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if (code is None or code & 0xFF != _BUSY) and "database is locked" not in str(exc):
            raise                   # a full disk, a read-only file: not a wait
        return exc
    finally:
        db.execute(f"PRAGMA busy_timeout={int(timeout)}")


def commit_group(db: sqlite3.Connection, batch: list[Write], *,
                 begun: bool = False) -> list[Exception | None]:
    """Commit `batch` in one transaction (`begun`: the caller began it); on
    failure, each write alone (never one behind a failed write of its run:
    `refuse_behind`).  The error of each write (None: stored)."""
    errors: list[Exception | None] = [None] * len(batch)
    failed: set = set()
    live = refuse_behind(batch, errors, failed)
    if not live:
        if begun:
            db.execute("ROLLBACK")
        return errors
    try:
        _commit(db, plan(live, _SQL), begun=begun)
        return errors
    except Exception as exc:  # noqa: BLE001 - isolate the failing write
        if db.in_transaction:       # (begun here, and the plan failed)
            db.execute("ROLLBACK")
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


def _commit(db: sqlite3.Connection, steps: list[Step], begun: bool = False) -> None:
    try:
        if not begun:
            db.execute("BEGIN IMMEDIATE")
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
    # an event's data arrives as orjson's UTF-8 bytes and is stored as TEXT (a
    # BLOB would change what json_extract and every reader of the column get)
    insert_events=("INSERT OR IGNORE INTO run_events (run_id, seq, type, block_id, time, data) "
                   "VALUES (?, ?, ?, ?, ?, CAST(? AS TEXT))"),
    encode=dumps_utf8_each,
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
