"""The embedded default: one SQLite file, nothing to start.

WAL mode with `synchronous=NORMAL`: readers never block the writer, several
`flowforge` processes can share the file, and a commit does not fsync (a
power cut may lose the last commits, never corrupt the file).  Calls run
inline on the event loop (a local query costs microseconds, less than a hop
to a thread); the runs' writes are committed in groups (`sqlite_writes.py`),
the log's checkpoints on a thread (`wal.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any, AsyncIterator

from flowforge.errors import StorageError
from flowforge.storage.base import Migration, Storage
from flowforge.storage.grouping import Write
from flowforge.storage.migrate import SQLiteSteps, apply_migrations
from flowforge.storage.migrations import SQLITE_MIGRATIONS
from flowforge.storage.records import RecordStore
from flowforge.storage.sqlite_writes import (BUSY_SECONDS, LOCK_RETRY, GroupWriter,
                                            busy_seconds, take_write_lock)
from flowforge.storage.users import UserStore
from flowforge.storage.wal import Checkpointer
from flowforge.storage.workflows import WorkflowStore

__all__ = ["SQLiteStorage"]



class SQLiteStorage(RecordStore, WorkflowStore, UserStore, Storage):
    """The shared SQL (`records`, `workflows`, `users` and the mixins of
    `Storage`) on one connection; here: opening the file, group commit."""

    _inserted_order = {"runs": "rowid", "run_blocks": "rowid", "users": "rowid",
                       "api_keys": "rowid"}
    _unique_violation = sqlite3.IntegrityError

    def __init__(self, path: str | Path, migrations: list[Migration] | None = None) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.migrations = migrations or SQLITE_MIGRATIONS
        self.db: sqlite3.Connection | None = None
        self.read_only = False             # opened to read: the file cannot be written
        self.busy = BUSY_SECONDS           # a write's wait for another process's lock
        # Run writes of one loop turn, committed together (sqlite_writes.py).
        self._writer = GroupWriter(self._conn, self._notify, self._committed)
        self._checkpointer: Checkpointer | None = None

    # -- lifecycle ---------------------------------------------------------------
    async def open(self) -> None:
        if self.db is not None:
            return
        self.busy = self._writer.busy = busy_seconds()
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            # `timeout`: a file another process holds (a fresh one being made, say)
            # is waited for as a write is, not taken for a read-only file
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                 timeout=self.busy)
            try:
                db.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as exc:
                db.close()
                if "full" in str(exc):     # SQLITE_FULL: not read-only, and nothing to read
                    raise StorageError(f"cannot open the database {self.path}: its disk is "
                                       f"full ({exc}): free space there, or set "
                                       f"FLOWFORGE_DATABASE_URL to a file on another disk"
                                       ) from None
                if "locked" in str(exc) or "busy" in str(exc):
                    raise StorageError(
                        f"cannot open the database {self.path}: database is locked by "
                        f"another process (waited {self.busy:g} s): let it finish, or "
                        f"wait longer with FLOWFORGE_SQLITE_BUSY_SECONDS") from None
                db = self._read_only()
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA busy_timeout={int(self.busy * 1000)}")
            db.execute("PRAGMA foreign_keys=ON")
            db.row_factory = sqlite3.Row
            self.db = db
            await self._migrate()
            if self.path != ":memory:" and not self.read_only:
                db.execute("PRAGMA wal_autocheckpoint=0")     # a thread does it (wal.py)
                self._checkpointer = Checkpointer(self.path)
        except sqlite3.DatabaseError as exc:
            if self.db is not None:
                self.db.close()
                self.db = None
            raise StorageError(f"cannot open the database {self.path}: {exc} "
                               f"(set FLOWFORGE_DATABASE_URL to use another file)") from None

    def _read_only(self) -> sqlite3.Connection:
        """The file on a read-only disk (or one this user may not write): opened
        to read, so its history can still be listed and shown; a database in
        WAL mode whose log files cannot be made there is read as it stands
        (`immutable`: nobody can change a file on a read-only disk)."""
        location = Path(self.path).resolve().as_uri()
        for options in ("mode=ro", "mode=ro&immutable=1"):
            db = sqlite3.connect(f"{location}?{options}", uri=True, check_same_thread=False,
                                 isolation_level=None)
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.OperationalError:
                db.close()
                continue
            self.read_only = True
            return db
        raise sqlite3.OperationalError("unable to open database file, even to read it")

    async def _migrate(self) -> None:
        steps = SQLiteSteps(self._conn(), "schema_migrations", f"the database {self.path}")
        steps.read_only = self.read_only
        try:
            await apply_migrations(self.migrations, steps)
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc):
                raise
            self.read_only = steps.read_only = True     # a file this process may not write
            await apply_migrations(self.migrations, steps)   # names the steps it lacks

    def _committed(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.wrote(self._conn())

    async def close(self) -> None:
        if self.db is not None:
            self._writer.close()
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        if self.db is not None:
            self.db.close()
            self.db = None

    def _conn(self) -> sqlite3.Connection:
        if self.db is None:
            raise StorageError("storage is not open: call `await storage.open()` first")
        return self.db

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        try:
            return [dict(row) for row in self._conn().execute(sql, args).fetchall()]
        except sqlite3.OperationalError as exc:
            raise self._unusable(exc) from None

    async def _sql_values(self, sql: str, args: Any = ()) -> list[Any]:
        try:
            return [row[0] for row in self._conn().execute(sql, args).fetchall()]
        except sqlite3.OperationalError as exc:
            raise self._unusable(exc) from None

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        """One statement that writes (a lease's compare-and-set, ...): while
        another process holds the write lock, the loop goes on and the
        statement tries again a moment later (`sqlite_writes`), up to
        its busy time, then waits in SQLite's busy handler as before."""
        db = self._conn()
        deadline = None
        try:
            while not self.read_only:
                if take_write_lock(db) is None:
                    try:
                        changed = db.execute(sql, args).rowcount
                        db.execute("COMMIT")
                    except BaseException:
                        if db.in_transaction:
                            db.execute("ROLLBACK")
                        raise
                    return changed
                now = time.monotonic()
                deadline = deadline or now + self.busy
                if now >= deadline:
                    break
                await asyncio.sleep(LOCK_RETRY)
            return db.execute(sql, args).rowcount
        except sqlite3.OperationalError as exc:      # a full disk, a read-only file
            raise self._unusable(exc) from None

    @contextlib.asynccontextmanager
    async def _sql_transaction(self) -> AsyncIterator[_Transaction]:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield _Transaction(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def _unusable(self, exc: sqlite3.OperationalError) -> StorageError:
        return StorageError(f"the database {self.path} refused the request: {exc}")

    # -- runs: their writes are committed in groups (sqlite_writes.py) ------------------
    def _join(self, write: Write) -> asyncio.Future:
        self._conn()                    # a closed store refuses here, not in the group
        return self._writer.join(write)

    async def cancel_requests(self, run_ids: list[str]) -> set[str]:
        found: set[str] = set()
        ids = list(run_ids)
        for start in range(0, len(ids), 500):          # SQLite's bound-parameter limit
            chunk = ids[start:start + 500]
            rows = await self._sql_rows(
                f"SELECT run_id FROM runs WHERE cancel_requested_at IS NOT NULL AND run_id IN "
                f"({', '.join('?' * len(chunk))})", chunk)
            found.update(row["run_id"] for row in rows)
        return found


class _Transaction:
    """Statements inside `SQLiteStorage._sql_transaction`."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    async def rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in self.db.execute(sql, args).fetchall()]

    async def many(self, sql: str, rows: Any) -> None:
        self.db.executemany(sql, rows)
