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

import json
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from flowforge.errors import NotFound, StorageError
from flowforge.registry.model import BlockDefinition

__all__ = ["BlockStore", "REGISTRY_MIGRATIONS", "fts_query"]

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


class BlockStore:
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

    # -- writes --------------------------------------------------------------------
    def put(self, definition: BlockDefinition) -> BlockDefinition:
        """Store a new version (1 for a new id); returns it with `version` set.
        A definition identical to the current head is not stored again."""
        body = definition.model_dump(exclude={"version"})
        with self._lock:
            head = self.db.execute("SELECT version FROM registry_heads WHERE id = ?",
                                   (definition.id,)).fetchone()
            if head is not None:
                current = self._version_row(definition.id, head[0])
                deleted = self.db.execute("SELECT deleted FROM registry_heads WHERE id = ?",
                                          (definition.id,)).fetchone()[0]
                if current == body and not deleted:
                    return definition.model_copy(update={"version": head[0]})
            version = (head[0] + 1) if head else 1
            now = time.time()
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute("INSERT INTO registry_versions VALUES (?, ?, ?, ?, ?)",
                                (definition.id, version, json.dumps(body), now,
                                 definition.metadata.created_by))
                self.db.execute(
                    "INSERT INTO registry_heads VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0) "
                    "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
                    "name = excluded.name, category = excluded.category, "
                    "execution_type = excluded.execution_type, "
                    "created_by = excluded.created_by, tier = excluded.tier, "
                    "updated_at = excluded.updated_at, deleted = 0",
                    (definition.id, version, definition.name, definition.category,
                     definition.execution_type, definition.metadata.created_by,
                     definition.metadata.tier, now))
                self.db.execute("DELETE FROM registry_fts WHERE id = ?", (definition.id,))
                self.db.execute("INSERT INTO registry_fts VALUES (?, ?, ?, ?, ?)",
                                (definition.id, definition.name, definition.description,
                                 definition.use_when, " ".join(definition.tags)))
                self.db.execute("COMMIT")
            except Exception:
                self.db.execute("ROLLBACK")
                raise
        return definition.model_copy(update={"version": version})

    def delete(self, block_id: str) -> None:
        """Hide a block (its versions stay, so old runs remain explainable)."""
        with self._lock:
            found = self.db.execute("UPDATE registry_heads SET deleted = 1 WHERE id = ? "
                                    "AND deleted = 0", (block_id,)).rowcount
            if not found:
                raise NotFound(f"no block '{block_id}' in the registry")
            self.db.execute("DELETE FROM registry_fts WHERE id = ?", (block_id,))

    # -- reads ---------------------------------------------------------------------
    def _version_row(self, block_id: str, version: int) -> dict[str, Any] | None:
        row = self.db.execute("SELECT definition FROM registry_versions WHERE id = ? AND "
                              "version = ?", (block_id, version)).fetchone()
        return json.loads(row[0]) if row else None

    def get(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        with self._lock:
            if version is None:
                head = self.db.execute("SELECT version FROM registry_heads WHERE id = ? AND "
                                       "deleted = 0", (block_id,)).fetchone()
                if head is None:
                    return None
                version = head[0]
            data = self._version_row(block_id, version)
        if data is None:
            return None
        return BlockDefinition.model_validate({**data, "version": version})

    def versions(self, block_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self.db.execute("SELECT version, created_at, created_by FROM "
                                   "registry_versions WHERE id = ? ORDER BY version",
                                   (block_id,)).fetchall()
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
            rows = self.db.execute(f"SELECT id FROM registry_heads WHERE {' AND '.join(where)} "
                                   f"ORDER BY id", args).fetchall()
        return [row[0] for row in rows]

    def text_search(self, query: str, limit: int = 10) -> list[tuple[str, float]]:
        """(id, score) by bm25 over name, description, use_when and tags."""
        match = fts_query(query)
        if not match:
            return []
        with self._lock:
            rows = self.db.execute(
                "SELECT id, bm25(registry_fts, 0, 2.0, 1.0, 1.0, 1.5) AS rank FROM registry_fts "
                "WHERE registry_fts MATCH ? ORDER BY rank LIMIT ?", (match, limit)).fetchall()
        return [(row[0], round(-row[1], 6)) for row in rows]
