"""The block registry on SQLite: the default, in the same file as the runs
(or the one `FLOWFORGE_REGISTRY_URL` names).  Full text is FTS5's bm25 over
name, description, use_when and tags.  An async caller is answered inline:
a local file answers in microseconds, less than a thread hop costs (see
`registry.store` for the interface and why the SQL underneath is blocking).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from flowforge.errors import StorageError
from flowforge.registry.model import BlockDefinition
from flowforge.registry.store import SHARED, BlockStore, BlockTables, fts_query
from flowforge.storage.migrate import Migration, SQLiteSteps, apply_migrations, run_now

__all__ = ["SQLiteBlockStore", "SQLiteBlockTables", "REGISTRY_MIGRATIONS"]

T = TypeVar("T")

REGISTRY_MIGRATIONS: list[Migration] = [
    Migration("0001_registry_blocks", (
        """CREATE TABLE registry_versions (
            id TEXT NOT NULL, version INTEGER NOT NULL, definition TEXT NOT NULL,
            created_at REAL NOT NULL, created_by TEXT,
            PRIMARY KEY (id, version))""",
        """CREATE TABLE registry_heads (
            id TEXT PRIMARY KEY, version INTEGER NOT NULL, name TEXT NOT NULL,
            category TEXT NOT NULL, execution_type TEXT NOT NULL, created_by TEXT,
            tier TEXT, updated_at REAL NOT NULL, deleted INTEGER NOT NULL DEFAULT 0)""",
        """CREATE VIRTUAL TABLE registry_fts USING fts5(
            id UNINDEXED, name, description, use_when, tags, tokenize = 'porter unicode61')""",
    )),
    # block ids per user: the key becomes (owner, id); every stored block keeps
    # its versions, under the owner its head's definition names ('' = shared)
    Migration("0002_blocks_per_owner", (
        """CREATE TABLE registry_heads_0002 (
            owner TEXT NOT NULL DEFAULT '', id TEXT NOT NULL, version INTEGER NOT NULL,
            name TEXT NOT NULL, category TEXT NOT NULL, execution_type TEXT NOT NULL,
            created_by TEXT, tier TEXT, updated_at REAL NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (owner, id))""",
        """INSERT INTO registry_heads_0002 (owner, id, version, name, category,
                execution_type, created_by, tier, updated_at, deleted)
            SELECT COALESCE((SELECT json_extract(v.definition, '$.metadata.owner')
                             FROM registry_versions v
                             WHERE v.id = h.id AND v.version = h.version), ''),
                   h.id, h.version, h.name, h.category, h.execution_type, h.created_by,
                   h.tier, h.updated_at, h.deleted
            FROM registry_heads h""",
        """CREATE TABLE registry_versions_0002 (
            owner TEXT NOT NULL DEFAULT '', id TEXT NOT NULL, version INTEGER NOT NULL,
            definition TEXT NOT NULL, created_at REAL NOT NULL, created_by TEXT,
            PRIMARY KEY (owner, id, version))""",
        """INSERT INTO registry_versions_0002 (owner, id, version, definition, created_at,
                created_by)
            SELECT COALESCE((SELECT h.owner FROM registry_heads_0002 h WHERE h.id = v.id),
                            json_extract(v.definition, '$.metadata.owner'), ''),
                   v.id, v.version, v.definition, v.created_at, v.created_by
            FROM registry_versions v""",
        "DROP TABLE registry_versions",
        "DROP TABLE registry_heads",
        "ALTER TABLE registry_versions_0002 RENAME TO registry_versions",
        "ALTER TABLE registry_heads_0002 RENAME TO registry_heads",
        "DROP TABLE registry_fts",
        """CREATE VIRTUAL TABLE registry_fts USING fts5(
            owner UNINDEXED, id UNINDEXED, name, description, use_when, tags,
            tokenize = 'porter unicode61')""",
        """INSERT INTO registry_fts (owner, id, name, description, use_when, tags)
            SELECT h.owner, h.id, json_extract(v.definition, '$.name'),
                   json_extract(v.definition, '$.description'),
                   COALESCE(json_extract(v.definition, '$.use_when'), ''),
                   COALESCE((SELECT group_concat(t.value, ' ')
                             FROM json_each(v.definition, '$.tags') t), '')
            FROM registry_heads h JOIN registry_versions v
                 ON v.owner = h.owner AND v.id = h.id AND v.version = h.version
            WHERE h.deleted = 0""",
    )),
]


class SQLiteBlockTables(BlockTables):
    """SQLite tables of the registry. Thread-safe (one lock, one connection)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = self.location = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        try:
            self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA busy_timeout=10000")
            if self.path != ":memory:":
                self.db.execute("PRAGMA journal_mode=WAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot open the block registry at {self.path}: {exc}") from None

    def _migrate(self) -> None:
        run_now(apply_migrations(REGISTRY_MIGRATIONS, SQLiteSteps(
            self.db, "registry_schema", f"the block registry at {self.path}")))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def _all(self, sql: str, args: Any = ()) -> list[tuple]:
        return self.db.execute(sql, args).fetchall()

    def _change(self, sql: str, args: Any = ()) -> int:
        return self.db.execute(sql, args).rowcount

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _index_text(self, definition: BlockDefinition, owner: str) -> None:
        self._change("DELETE FROM registry_fts WHERE owner = ? AND id = ?",
                     (owner, definition.id))
        self._change("INSERT INTO registry_fts (owner, id, name, description, use_when, tags) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (owner, definition.id, definition.name, definition.description,
                      definition.use_when, " ".join(definition.tags)))

    def text_search(self, query: str, limit: int = 10,
                    owners: tuple[str, ...] = (SHARED,)) -> list[tuple[str, str, float]]:
        """(owner, id, score) by bm25 over name, description, use_when and tags,
        in the namespaces `owners` only."""
        match = fts_query(query)
        if not match:
            return []
        marks = ", ".join("?" for _ in owners)
        with self._lock:
            rows = self.db.execute(
                "SELECT owner, id, bm25(registry_fts, 0, 0, 2.0, 1.0, 1.0, 1.5) AS rank "
                f"FROM registry_fts WHERE registry_fts MATCH ? AND owner IN ({marks}) "
                "ORDER BY rank LIMIT ?", (match, *owners, limit)).fetchall()
        # bm25 is negative and, over a small library, tiny (1e-06): shown relative to
        # the best match instead, 1.0 for it, so scores read as scores.
        best = max((-row[2] for row in rows), default=0.0)
        return [(row[0], row[1], round(-row[2] / best, 3) if best > 0 else 0.0)
                for row in rows]


class SQLiteBlockStore(BlockStore):
    """The registry in a SQLite file (or `:memory:`); async callers are
    answered inline."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        super().__init__(SQLiteBlockTables(path))

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return function(*args, **kwargs)
