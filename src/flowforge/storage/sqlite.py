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
import sqlite3
import time
from pathlib import Path
from typing import Any

from flowforge.errors import StorageError
from flowforge.storage.base import (BLOCK_FIELDS, DELIVERY_FIELDS, KEY_FIELDS, RUN_FIELDS,
                                    USER_FIELDS, AlreadyExists, Migration, Storage)
from flowforge.storage.checkpoints import BLOCK_EVENT_TYPES, fold, merged
from flowforge.storage.encoding import dumps as _dumps, loads as _loads
from flowforge.storage.migrate import SQLiteSteps, apply_migrations
from flowforge.storage.migrations import SQLITE_MIGRATIONS
from flowforge.storage.grouping import (Write, created, decoded_block, decoded_run, recorded,
                                        updated)
from flowforge.storage.sqlite_writes import (BUSY_SECONDS, LOCK_RETRY, GroupWriter,
                                            take_write_lock)
from flowforge.storage.wal import Checkpointer

__all__ = ["SQLiteStorage"]



class SQLiteStorage(Storage):
    def __init__(self, path: str | Path, migrations: list[Migration] | None = None) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.migrations = migrations or SQLITE_MIGRATIONS
        self.db: sqlite3.Connection | None = None
        self.read_only = False             # opened to read: the file cannot be written
        # Run writes of one loop turn, committed together (sqlite_writes.py).
        self._writer = GroupWriter(self._conn, self._notify, self._committed)
        self._checkpointer: Checkpointer | None = None

    # -- lifecycle ---------------------------------------------------------------
    async def open(self) -> None:
        if self.db is not None:
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError:
                db.close()
                db = self._read_only()
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
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

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        """One statement that writes (a lease's compare-and-set, ...): while
        another process holds the write lock, the loop goes on and the
        statement tries again a moment later (`sqlite_writes`), up to
        BUSY_SECONDS, then waits in SQLite's busy handler as before."""
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
                deadline = deadline or now + BUSY_SECONDS
                if now >= deadline:
                    break
                await asyncio.sleep(LOCK_RETRY)
            return db.execute(sql, args).rowcount
        except sqlite3.OperationalError as exc:      # a full disk, a read-only file
            raise self._unusable(exc) from None

    def _unusable(self, exc: sqlite3.OperationalError) -> StorageError:
        return StorageError(f"the database {self.path} refused the request: {exc}")

    # -- runs --------------------------------------------------------------------
    async def create_run(self, run: dict[str, Any]) -> None:
        await self._join(created(run))

    async def update_run(self, run_id: str, **fields: Any) -> None:
        write = updated(run_id, fields)
        if fields:
            await self._join(write)

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _run_row(row) if row else None

    async def cancel_requests(self, run_ids: list[str]) -> set[str]:
        found: set[str] = set()
        ids = list(run_ids)
        for start in range(0, len(ids), 500):          # SQLite's bound-parameter limit
            chunk = ids[start:start + 500]
            rows = self._conn().execute(
                f"SELECT run_id FROM runs WHERE cancel_requested_at IS NOT NULL AND run_id IN "
                f"({', '.join('?' * len(chunk))})", chunk).fetchall()
            found.update(row[0] for row in rows)
        return found

    async def list_runs(self, *, workflow_id: str | None = None, status: str | None = None,
                        user_id: str | None = None, limit: int = 50, offset: int = 0
                        ) -> list[dict[str, Any]]:
        where, args = [], []
        for column, value in (("workflow_id", workflow_id), ("status", status),
                              ("user_id", user_id)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        columns = ", ".join(f for f in RUN_FIELDS if f != "document")
        rows = self._conn().execute(
            f"SELECT {columns} FROM runs {clause} ORDER BY created_at DESC, rowid DESC "
            f"LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
        return [_run_row(row) for row in rows]

    # -- events and blocks ---------------------------------------------------------
    async def record(self, run_id: str, events: list[dict[str, Any]],
                     blocks: list[dict[str, Any]]) -> None:
        await self.record_later(run_id, events, blocks)

    def record_later(self, run_id: str, events: list[dict[str, Any]],
                     blocks: list[dict[str, Any]], *, after: Any = None,
                     update: dict[str, Any] | None = None,
                     fence: tuple[str, float] | None = None) -> asyncio.Future:
        """Joins this loop turn's transaction; writes commit in call order, so
        `after` is stored first by construction (and this one not at all when
        `after` failed: `grouping.refuse_behind`; nor when `fence`'s owner lost
        the lease: `LeaseLost`)."""
        return self._join(recorded(run_id, events, blocks, update, after, fence))

    # -- group commit (sqlite_writes.py) ----------------------------------------------
    def _join(self, write: Write) -> asyncio.Future:
        self._conn()
        return self._writer.join(write)

    async def get_events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            "SELECT data FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq",
            (run_id, after_seq)).fetchall()
        return [_loads(row[0]) for row in rows]

    async def get_blocks(self, run_id: str) -> list[dict[str, Any]]:
        db = self._conn()
        events = db.execute(
            f"SELECT data FROM run_events WHERE run_id = ? AND type IN "
            f"({', '.join('?' * len(BLOCK_EVENT_TYPES))}) ORDER BY seq",
            (run_id, *BLOCK_EVENT_TYPES)).fetchall()
        rows = db.execute(
            f"SELECT {', '.join(BLOCK_FIELDS)} FROM run_blocks WHERE run_id = ? ORDER BY rowid",
            (run_id,)).fetchall()
        stored = [decoded_block(dict(row)) for row in rows]
        return merged(fold(run_id, (_loads(row[0]) for row in events)), stored)

    # -- memory ------------------------------------------------------------------
    async def get_memory(self, user_id: str, keys: list[str] | None = None) -> dict[str, Any]:
        rows = self._conn().execute("SELECT key, value FROM memory WHERE user_id = ? "
                                    "ORDER BY key", (user_id,)).fetchall()
        values = {row[0]: _loads(row[1]) for row in rows}
        if keys is not None:
            values = {k: v for k, v in values.items() if k in keys}
        return values

    async def save_memory(self, user_id: str, values: dict[str, Any]) -> None:
        if not values:
            return
        now = time.time()
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT INTO memory (user_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at",
                [(user_id, k, _dumps(v), now) for k, v in values.items()])
            db.execute("COMMIT")
        except Exception:
            db.execute("ROLLBACK")
            raise

    # -- workflows -----------------------------------------------------------------
    async def save_workflow(self, owner: str, workflow_id: str, document: dict[str, Any],
                            source: str | None = None) -> int:
        now = time.time()
        name = document.get("name") if isinstance(document, dict) else None
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute(
                "INSERT INTO workflows (owner, workflow_id, latest_version, name, created_at, "
                "updated_at) VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT (owner, workflow_id) DO "
                "UPDATE SET latest_version = workflows.latest_version + 1, name = excluded.name, "
                "updated_at = excluded.updated_at, deleted_at = NULL RETURNING latest_version",
                (owner, workflow_id, name, now, now)).fetchone()[0]
            db.execute("INSERT INTO workflow_versions (owner, workflow_id, version, name, "
                       "document, created_at, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (owner, workflow_id, version, name, _dumps(document), now, source))
            db.execute("COMMIT")
        except Exception:
            db.execute("ROLLBACK")
            raise
        return version

    async def get_workflow(self, owner: str, workflow_id: str, version: int | None = None
                           ) -> dict[str, Any] | None:
        row = self._conn().execute(
            "SELECT w.owner, w.workflow_id, v.version, w.latest_version, v.name, v.document, "
            "v.source, v.created_at, w.updated_at FROM workflows w JOIN workflow_versions v ON "
            "v.owner = w.owner AND v.workflow_id = w.workflow_id AND v.version = "
            "COALESCE(?, w.latest_version) WHERE w.owner = ? AND w.workflow_id = ? AND "
            "w.deleted_at IS NULL", (version, owner, workflow_id)).fetchone()
        if row is None:
            return None
        item = dict(row)
        item["document"] = _loads(item["document"])
        return item

    async def list_workflows(self, owner: str | None = None, *, limit: int = 50,
                             offset: int = 0) -> list[dict[str, Any]]:
        clause, args = ("AND w.owner = ?", [owner]) if owner is not None else ("", [])
        rows = self._conn().execute(
            "SELECT w.owner, w.workflow_id, w.latest_version AS version, w.name, "
            "json_extract(v.document, '$.description') AS description, "
            "(SELECT r.status FROM runs r WHERE r.workflow_id = w.workflow_id AND "
            "r.user_id = w.owner ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1) "
            "AS last_run_status, w.created_at, w.updated_at FROM workflows w "
            "JOIN workflow_versions v ON v.owner = w.owner AND v.workflow_id = w.workflow_id "
            f"AND v.version = w.latest_version WHERE w.deleted_at IS NULL {clause} "
            "ORDER BY w.workflow_id, w.owner LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
        return [dict(row) for row in rows]

    async def list_workflow_versions(self, owner: str, workflow_id: str
                                     ) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            "SELECT v.version, v.name, v.created_at FROM workflow_versions v JOIN workflows w "
            "ON v.owner = w.owner AND v.workflow_id = w.workflow_id WHERE w.owner = ? AND "
            "w.workflow_id = ? AND w.deleted_at IS NULL ORDER BY v.version",
            (owner, workflow_id)).fetchall()
        return [dict(row) for row in rows]

    async def delete_workflow(self, owner: str, workflow_id: str) -> bool:
        cursor = self._conn().execute(
            "UPDATE workflows SET deleted_at = ? WHERE owner = ? AND workflow_id = ? AND "
            "deleted_at IS NULL", (time.time(), owner, workflow_id))
        return cursor.rowcount > 0

    # -- users and keys ----------------------------------------------------------------
    async def create_user(self, user: dict[str, Any]) -> None:
        try:
            self._conn().execute(
                f"INSERT INTO users ({', '.join(USER_FIELDS)}) VALUES "
                f"({', '.join('?' * len(USER_FIELDS))})", [user.get(f) for f in USER_FIELDS])
        except sqlite3.IntegrityError:
            raise AlreadyExists(f"a user named '{user.get('name')}' already exists "
                                f"(choose another name)") from None

    async def get_user(self, user_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM users WHERE user_id = ?",
                                   (user_id,)).fetchone()
        return dict(row) if row else None

    async def get_user_by_name(self, name: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        return dict(row) if row else None

    async def list_users(self) -> list[dict[str, Any]]:
        rows = self._conn().execute("SELECT * FROM users ORDER BY created_at, rowid").fetchall()
        return [dict(row) for row in rows]

    async def add_api_key(self, key: dict[str, Any]) -> None:
        self._conn().execute(
            f"INSERT INTO api_keys ({', '.join(KEY_FIELDS)}) VALUES "
            f"({', '.join('?' * len(KEY_FIELDS))})", [key.get(f) for f in KEY_FIELDS])

    async def user_for_key_hash(self, key_hash: str) -> dict[str, Any] | None:
        row = self._conn().execute(
            "SELECT u.* FROM api_keys k JOIN users u ON u.user_id = k.user_id "
            "WHERE k.key_hash = ? AND k.revoked_at IS NULL", (key_hash,)).fetchone()
        return dict(row) if row else None

    async def list_api_keys(self, user_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            f"SELECT {', '.join(KEY_FIELDS)} FROM api_keys WHERE user_id = ? "
            "ORDER BY created_at, rowid", (user_id,)).fetchall()
        return [dict(row) for row in rows]

    async def revoke_api_key(self, key_id: str) -> bool:
        cursor = self._conn().execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
            (time.time(), key_id))
        return cursor.rowcount > 0

    # -- webhook deliveries ----------------------------------------------------------------
    async def add_delivery(self, delivery: dict[str, Any]) -> None:
        values = [delivery.get(f) for f in DELIVERY_FIELDS]
        values[DELIVERY_FIELDS.index("succeeded")] = int(bool(delivery.get("succeeded")))
        self._conn().execute(
            f"INSERT INTO webhook_deliveries ({', '.join(DELIVERY_FIELDS)}) VALUES "
            f"({', '.join('?' * len(DELIVERY_FIELDS))})", values)

    async def list_deliveries(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            f"SELECT {', '.join(DELIVERY_FIELDS)} FROM webhook_deliveries WHERE run_id = ? "
            "ORDER BY attempt", (run_id,)).fetchall()
        return [{**dict(row), "succeeded": bool(row["succeeded"])} for row in rows]


def _run_row(row: sqlite3.Row) -> dict[str, Any]:
    return decoded_run(dict(row))
