"""The block registry on PostgreSQL, for servers that keep everything there.

Same tables, versions and answers as the SQLite store (`store.py`), so
several server processes or hosts on one database share one registry.  Full
text is a weighted `tsvector` (name > tags > description, use_when) ranked
by `ts_rank`, where SQLite uses FTS5's bm25 with the same weights.  Calls are
synchronous like the SQLite store's (the compiler checks `uses:` blocks
synchronously); one connection behind a lock, a query over loopback costs
well under a millisecond.  Migrations run under an advisory lock, so servers
starting together apply each step once.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from flowforge.errors import NotFound, StorageError
from flowforge.registry.model import BlockDefinition
from flowforge.registry.store import _WORD

__all__ = ["PostgresBlockStore", "POSTGRES_REGISTRY_MIGRATIONS"]

POSTGRES_REGISTRY_MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    ("0001_registry_blocks", (
        """CREATE TABLE registry_versions (
            id TEXT NOT NULL, version INTEGER NOT NULL, definition TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL, created_by TEXT,
            PRIMARY KEY (id, version))""",
        """CREATE TABLE registry_heads (
            id TEXT PRIMARY KEY, version INTEGER NOT NULL, name TEXT NOT NULL,
            category TEXT NOT NULL, execution_type TEXT NOT NULL, created_by TEXT,
            tier TEXT, updated_at DOUBLE PRECISION NOT NULL,
            deleted BOOLEAN NOT NULL DEFAULT FALSE)""",
        """CREATE TABLE registry_fts (id TEXT PRIMARY KEY, document TSVECTOR NOT NULL)""",
        "CREATE INDEX registry_fts_document ON registry_fts USING GIN (document)",
    )),
]

# ts_rank weights for D, C, B, A: use_when, description, tags, name (FTS5: 1, 1, 1.5, 2).
_WEIGHTS = "{0.5, 0.5, 0.75, 1.0}"
_DOCUMENT = ("setweight(to_tsvector('english', %s), 'A') || "
             "setweight(to_tsvector('english', %s), 'B') || "
             "setweight(to_tsvector('english', %s), 'C') || "
             "setweight(to_tsvector('english', %s), 'D')")


class PostgresBlockStore:
    """PostgreSQL tables of the registry. Thread-safe (one lock, one connection)."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise StorageError("a registry on PostgreSQL needs psycopg: pip install "
                               "'flowforge[server]'") from None
        from flowforge.storage.postgres import _split_url

        self.url = url
        conninfo, _ = _split_url(url)
        self._lock = threading.RLock()
        try:
            self.db = psycopg.connect(conninfo, autocommit=True)
            self._migrate()
        except psycopg.Error as exc:
            raise StorageError(f"cannot open the block registry at {url}: {exc}") from None

    def _migrate(self) -> None:
        with self._lock, self.db.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(hashtext('flowforge_registry'))")
            self.db.execute("CREATE TABLE IF NOT EXISTS registry_schema "
                            "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)")
            done = {row[0] for row in self.db.execute("SELECT name FROM registry_schema")}
            for name, statements in POSTGRES_REGISTRY_MIGRATIONS:
                if name in done:
                    continue
                for statement in statements:
                    self.db.execute(statement)
                self.db.execute("INSERT INTO registry_schema VALUES (%s, %s)",
                                (name, time.time()))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # -- writes --------------------------------------------------------------------
    def put(self, definition: BlockDefinition) -> BlockDefinition:
        """Store a new version (1 for a new id); returns it with `version` set.
        A definition identical to the current head is not stored again."""
        body = definition.model_dump(exclude={"version"})
        with self._lock, self.db.transaction():
            head = self.db.execute("SELECT version, deleted FROM registry_heads WHERE id = %s "
                                   "FOR UPDATE", (definition.id,)).fetchone()
            if head is not None and not head[1] and \
                    self._version_row(definition.id, head[0]) == body:
                return definition.model_copy(update={"version": head[0]})
            version = (head[0] + 1) if head else 1
            now = time.time()
            self.db.execute("INSERT INTO registry_versions VALUES (%s, %s, %s, %s, %s)",
                            (definition.id, version, json.dumps(body), now,
                             definition.metadata.created_by))
            self.db.execute(
                "INSERT INTO registry_heads VALUES (%s, %s, %s, %s, %s, %s, %s, %s, FALSE) "
                "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
                "name = excluded.name, category = excluded.category, "
                "execution_type = excluded.execution_type, created_by = excluded.created_by, "
                "tier = excluded.tier, updated_at = excluded.updated_at, deleted = FALSE",
                (definition.id, version, definition.name, definition.category,
                 definition.execution_type, definition.metadata.created_by,
                 definition.metadata.tier, now))
            self.db.execute(
                f"INSERT INTO registry_fts VALUES (%s, {_DOCUMENT}) "
                f"ON CONFLICT (id) DO UPDATE SET document = excluded.document",
                (definition.id, definition.name, " ".join(definition.tags),
                 definition.description, definition.use_when))
        return definition.model_copy(update={"version": version})

    def delete(self, block_id: str) -> None:
        """Hide a block (its versions stay, so old runs remain explainable)."""
        with self._lock, self.db.transaction():
            found = self.db.execute("UPDATE registry_heads SET deleted = TRUE WHERE id = %s "
                                    "AND NOT deleted", (block_id,)).rowcount
            if not found:
                raise NotFound(f"no block '{block_id}' in the registry")
            self.db.execute("DELETE FROM registry_fts WHERE id = %s", (block_id,))

    # -- reads ---------------------------------------------------------------------
    def _version_row(self, block_id: str, version: int) -> dict[str, Any] | None:
        row = self.db.execute("SELECT definition FROM registry_versions WHERE id = %s AND "
                              "version = %s", (block_id, version)).fetchone()
        return json.loads(row[0]) if row else None

    def get(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        with self._lock:
            if version is None:
                head = self.db.execute("SELECT version FROM registry_heads WHERE id = %s AND "
                                       "NOT deleted", (block_id,)).fetchone()
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
                                   "registry_versions WHERE id = %s ORDER BY version",
                                   (block_id,)).fetchall()
        return [{"version": v, "created_at": t, "created_by": c} for v, t, c in rows]

    def ids(self, *, category: str | None = None, created_by: str | None = None,
            execution_type: str | None = None) -> list[str]:
        where, args = ["NOT deleted"], []
        for column, value in (("category", category), ("created_by", created_by),
                              ("execution_type", execution_type)):
            if value is not None:
                where.append(f"{column} = %s")
                args.append(value)
        with self._lock:
            rows = self.db.execute(f"SELECT id FROM registry_heads WHERE {' AND '.join(where)} "
                                   f"ORDER BY id", args).fetchall()
        return [row[0] for row in rows]

    def text_search(self, query: str, limit: int = 10) -> list[tuple[str, float]]:
        """(id, score) by ts_rank over name, tags, description and use_when."""
        words = [w for w in _WORD.findall(query.lower()) if len(w) > 1]
        if not words:
            return []
        expression = " | ".join(dict.fromkeys(words))
        with self._lock:
            rows = self.db.execute(
                "SELECT id, ts_rank(%s, document, q) AS rank "
                "FROM registry_fts, to_tsquery('english', %s) AS q "
                "WHERE document @@ q ORDER BY rank DESC, id LIMIT %s",
                (_WEIGHTS, expression, limit)).fetchall()
        return [(row[0], round(float(row[1]), 6)) for row in rows]
