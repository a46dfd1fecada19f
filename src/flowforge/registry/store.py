"""Where registry blocks live: every version of every definition, the
current head of each, and a full-text index (embeddings live in the knowledge
layer, see `registry.search`).

The registry keeps its own tables and its own ordered migration list
(`REGISTRY_MIGRATIONS`, recorded in `registry_schema`), on the same database
as runs (`FLOWFORGE_DATABASE_URL`: a SQLite file here, PostgreSQL in
`store_postgres.py`) unless `FLOWFORGE_REGISTRY_URL` names another.  So the storage layer's owner and this module never edit
each other's migrations.  Calls are synchronous: a local SQLite query costs
microseconds, and the compiler checks `uses:` blocks synchronously.

A block is keyed by (owner, id): owner '' holds the shared blocks (the
bundled library, an administrator's, the local user's), a server user's id
holds that user's own.  Two users may hold the same id without either
learning of the other; `registry.owned` layers a user's namespace over the
shared one.  Migration 0002 moved every stored block to the owner its
definition names (`metadata.owner`), all versions of an id together.
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
from flowforge.storage.migrate import Migration, SQLiteSteps, apply_migrations, run_now

__all__ = ["BlockStore", "RegistryTables", "REGISTRY_MIGRATIONS", "SHARED", "fts_query",
           "owner_of", "WORD_RE"]

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

#: the namespace of shared blocks (library, administrator, local user)
SHARED = ""

#: a word of a search query or of a block's text (the postgres store splits alike)
WORD_RE = re.compile(r"\w+", re.UNICODE)


def owner_of(definition: BlockDefinition) -> str:
    """The namespace a definition belongs to: its `metadata.owner`, else shared."""
    return str(getattr(definition.metadata, "owner", None) or SHARED)


def fts_query(text: str) -> str:
    """Free text -> an FTS5 query: every word, quoted, OR-ed (bm25 ranks)."""
    words = [w for w in WORD_RE.findall(text.lower()) if len(w) > 1]
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

    def _index_text(self, definition: BlockDefinition, owner: str) -> None:
        """(Re)index the block's name, description, use_when and tags."""
        raise NotImplementedError

    # -- writes --------------------------------------------------------------------
    def put(self, definition: BlockDefinition) -> BlockDefinition:
        """Store a new version (1 for a new id) under the owner its metadata names
        (none: shared); returns it with `version` set.  A definition identical to
        the current head is not stored again."""
        owner = owner_of(definition)
        body = definition.model_dump(exclude={"version"})
        with self._lock, self._transaction():
            head = self._one("SELECT version, deleted FROM registry_heads WHERE owner = ? "
                             "AND id = ?" + self._lock_head, (owner, definition.id))
            if head is not None and not head[1] and \
                    self._version_row(definition.id, head[0], owner) == body:
                return definition.model_copy(update={"version": head[0]})
            version = (head[0] + 1) if head else 1
            now = time.time()
            self._change("INSERT INTO registry_versions (owner, id, version, definition, "
                         "created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)",
                         (owner, definition.id, version, json.dumps(body), now,
                          definition.metadata.created_by))
            self._change(
                "INSERT INTO registry_heads (owner, id, version, name, category, "
                "execution_type, created_by, tier, updated_at, deleted) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0) "
                "ON CONFLICT (owner, id) DO UPDATE SET version = excluded.version, "
                "name = excluded.name, category = excluded.category, "
                "execution_type = excluded.execution_type, created_by = excluded.created_by, "
                "tier = excluded.tier, updated_at = excluded.updated_at, deleted = 0",
                (owner, definition.id, version, definition.name, definition.category,
                 definition.execution_type, definition.metadata.created_by,
                 definition.metadata.tier, now))
            self._index_text(definition, owner)
        return definition.model_copy(update={"version": version})

    def delete(self, block_id: str, owner: str = SHARED) -> None:
        """Hide a block (its versions stay, so old runs remain explainable)."""
        with self._lock, self._transaction():
            found = self._change("UPDATE registry_heads SET deleted = 1 WHERE owner = ? "
                                 "AND id = ? AND deleted = 0", (owner, block_id))
            if not found:
                raise NotFound(f"no block '{block_id}' in the registry")
            self._change("DELETE FROM registry_fts WHERE owner = ? AND id = ?",
                         (owner, block_id))

    # -- reads ---------------------------------------------------------------------
    def _version_row(self, block_id: str, version: int,
                     owner: str = SHARED) -> dict[str, Any] | None:
        row = self._one("SELECT definition FROM registry_versions WHERE owner = ? AND "
                        "id = ? AND version = ?", (owner, block_id, version))
        return json.loads(row[0]) if row else None

    def get(self, block_id: str, version: int | None = None,
            owner: str = SHARED) -> BlockDefinition | None:
        with self._lock:
            if version is None:
                head = self._one("SELECT version FROM registry_heads WHERE owner = ? AND "
                                 "id = ? AND deleted = 0", (owner, block_id))
                if head is None:
                    return None
                version = head[0]
            data = self._version_row(block_id, version, owner)
        if data is None:
            return None
        return BlockDefinition.model_validate({**data, "version": version})

    def versions(self, block_id: str, owner: str = SHARED) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._all("SELECT version, created_at, created_by FROM registry_versions "
                             "WHERE owner = ? AND id = ? ORDER BY version", (owner, block_id))
        return [{"version": v, "created_at": t, "created_by": c} for v, t, c in rows]

    def ids(self, *, category: str | None = None, created_by: str | None = None,
            execution_type: str | None = None, owner: str = SHARED) -> list[str]:
        """The ids of one namespace (`owner`), filtered."""
        where, args = ["deleted = 0", "owner = ?"], [owner]
        for column, value in (("category", category), ("created_by", created_by),
                              ("execution_type", execution_type)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        with self._lock:
            rows = self._all(f"SELECT id FROM registry_heads WHERE {' AND '.join(where)} "
                             f"ORDER BY id", args)
        return [row[0] for row in rows]

    def keys(self) -> list[tuple[str, str]]:
        """(owner, id) of every block, every namespace (what search indexes)."""
        with self._lock:
            rows = self._all("SELECT owner, id FROM registry_heads WHERE deleted = 0 "
                             "ORDER BY owner, id")
        return [(row[0], row[1]) for row in rows]


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
