"""Where registry blocks live: every version of every definition, the
current head of each, and a full-text index (embeddings live in the knowledge
layer, see `registry.search`).

The registry keeps its own tables and its own ordered migration list
(`REGISTRY_MIGRATIONS`, recorded in `registry_schema`), on the same database
as runs (`FLOWFORGE_DATABASE_URL`: a SQLite file here, PostgreSQL in
`store_postgres.py`) unless `FLOWFORGE_REGISTRY_URL` names another.  So the storage layer's owner and this module never edit
each other's migrations.  Calls are synchronous: a local SQLite query costs
microseconds, and the compiler checks `uses:` blocks synchronously.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from flowforge.errors import NotFound, StorageError
from flowforge.registry.model import BlockDefinition

__all__ = ["BlockStore", "RegistryTables", "REGISTRY_MIGRATIONS", "fts_query"]

REGISTRY_MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    ("0001_registry_blocks", (
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
]

_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str) -> str:
    """Free text -> an FTS5 query: every word, quoted, OR-ed (bm25 ranks)."""
    words = [w for w in _WORD.findall(text.lower()) if len(w) > 1]
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


class RegistryTables:
    """Reads and deletes both back ends write the same way: SQL with `?`
    placeholders (the PostgreSQL store turns them into `%s`), `deleted` as 0/1."""

    _lock: Any

    def _all(self, sql: str, args: Any = ()) -> list[tuple]:
        raise NotImplementedError

    def _change(self, sql: str, args: Any = ()) -> int:
        """Run a write; its row count."""
        raise NotImplementedError

    def _transaction(self) -> Any:
        raise NotImplementedError

    def _one(self, sql: str, args: Any = ()) -> tuple | None:
        rows = self._all(sql, args)
        return rows[0] if rows else None

    _lock_head = ""          # PostgreSQL: " FOR UPDATE" (SQLite's write lock covers it)

    def _index_text(self, definition: BlockDefinition) -> None:
        """(Re)index the block's name, description, use_when and tags."""
        raise NotImplementedError

    # -- writes --------------------------------------------------------------------
    def put(self, definition: BlockDefinition) -> BlockDefinition:
        """Store a new version (1 for a new id); returns it with `version` set.
        A definition identical to the current head is not stored again."""
        body = definition.model_dump(exclude={"version"})
        with self._lock, self._transaction():
            head = self._one("SELECT version, deleted FROM registry_heads WHERE id = ?"
                             + self._lock_head, (definition.id,))
            if head is not None and not head[1] and \
                    self._version_row(definition.id, head[0]) == body:
                return definition.model_copy(update={"version": head[0]})
            version = (head[0] + 1) if head else 1
            now = time.time()
            self._change("INSERT INTO registry_versions VALUES (?, ?, ?, ?, ?)",
                         (definition.id, version, json.dumps(body), now,
                          definition.metadata.created_by))
            self._change(
                "INSERT INTO registry_heads VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0) "
                "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
                "name = excluded.name, category = excluded.category, "
                "execution_type = excluded.execution_type, created_by = excluded.created_by, "
                "tier = excluded.tier, updated_at = excluded.updated_at, deleted = 0",
                (definition.id, version, definition.name, definition.category,
                 definition.execution_type, definition.metadata.created_by,
                 definition.metadata.tier, now))
            self._index_text(definition)
        return definition.model_copy(update={"version": version})

    def delete(self, block_id: str) -> None:
        """Hide a block (its versions stay, so old runs remain explainable)."""
        with self._lock, self._transaction():
            found = self._change("UPDATE registry_heads SET deleted = 1 WHERE id = ? "
                                 "AND deleted = 0", (block_id,))
            if not found:
                raise NotFound(f"no block '{block_id}' in the registry")
            self._change("DELETE FROM registry_fts WHERE id = ?", (block_id,))

    # -- reads ---------------------------------------------------------------------
    def _version_row(self, block_id: str, version: int) -> dict[str, Any] | None:
        row = self._one("SELECT definition FROM registry_versions WHERE id = ? AND "
                        "version = ?", (block_id, version))
        return json.loads(row[0]) if row else None

    def get(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        with self._lock:
            if version is None:
                head = self._one("SELECT version FROM registry_heads WHERE id = ? AND "
                                 "deleted = 0", (block_id,))
                if head is None:
                    return None
                version = head[0]
            data = self._version_row(block_id, version)
        if data is None:
            return None
        return BlockDefinition.model_validate({**data, "version": version})

    def versions(self, block_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._all("SELECT version, created_at, created_by FROM registry_versions "
                             "WHERE id = ? ORDER BY version", (block_id,))
        return [{"version": v, "created_at": t, "created_by": c} for v, t, c in rows]

    def ids(self, *, category: str | None = None, created_by: str | None = None,
            execution_type: str | None = None) -> list[str]:
        where, args = ["deleted = 0"], []
        for column, value in (("category", category), ("created_by", created_by),
                              ("execution_type", execution_type)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        with self._lock:
            rows = self._all(f"SELECT id FROM registry_heads WHERE {' AND '.join(where)} "
                             f"ORDER BY id", args)
        return [row[0] for row in rows]


class BlockStore(RegistryTables):
    """SQLite tables of the registry. Thread-safe (one lock, one connection)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
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

    @classmethod
    def from_url(cls, url: str) -> Any:
        """The store for `url`: a SQLite file (or `:memory:`), or PostgreSQL."""
        if url.startswith("sqlite:///"):
            return cls(url[len("sqlite:///"):] or ":memory:")
        if url.startswith("sqlite:"):
            return cls(":memory:")
        if url.startswith(("postgresql://", "postgres://")):
            from flowforge.registry.store_postgres import PostgresBlockStore
            return PostgresBlockStore(url)
        if "://" in url:
            raise StorageError(f"the block registry needs SQLite or PostgreSQL, not '{url}': "
                               f"set FLOWFORGE_REGISTRY_URL=sqlite:///path/registry.db or "
                               f"postgresql://...")
        return cls(url)

    def _migrate(self) -> None:
        db = self.db
        db.execute("CREATE TABLE IF NOT EXISTS registry_schema "
                   "(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        done = {row[0] for row in db.execute("SELECT name FROM registry_schema")}
        for name, statements in REGISTRY_MIGRATIONS:
            if name in done:
                continue
            db.execute("BEGIN IMMEDIATE")
            try:
                if db.execute("SELECT 1 FROM registry_schema WHERE name = ?",
                              (name,)).fetchone() is None:
                    for statement in statements:
                        db.execute(statement)
                    db.execute("INSERT INTO registry_schema VALUES (?, ?)", (name, time.time()))
                db.execute("COMMIT")
            except Exception:
                db.execute("ROLLBACK")
                raise

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

    def _index_text(self, definition: BlockDefinition) -> None:
        self._change("DELETE FROM registry_fts WHERE id = ?", (definition.id,))
        self._change("INSERT INTO registry_fts VALUES (?, ?, ?, ?, ?)",
                     (definition.id, definition.name, definition.description,
                      definition.use_when, " ".join(definition.tags)))

    def text_search(self, query: str, limit: int = 10) -> list[tuple[str, float]]:
        """(id, score) by bm25 over name, description, use_when and tags."""
        match = fts_query(query)
        if not match:
            return []
        with self._lock:
            rows = self.db.execute(
                "SELECT id, bm25(registry_fts, 0, 2.0, 1.0, 1.0, 1.5) AS rank FROM registry_fts "
                "WHERE registry_fts MATCH ? ORDER BY rank LIMIT ?", (match, limit)).fetchall()
        # bm25 is negative and, over a small library, tiny (1e-06): shown relative to
        # the best match instead, 1.0 for it, so scores read as scores.
        best = max((-row[1] for row in rows), default=0.0)
        return [(row[0], round(-row[1] / best, 3) if best > 0 else 0.0) for row in rows]
