"""The block registry on PostgreSQL, for servers that keep everything there.

Same tables, versions and answers as the SQLite store (`store.py`), so
several server processes or hosts on one database share one registry.  Full
text is a weighted `tsvector` (name > tags > description, use_when) ranked
by `ts_rank`, where SQLite uses FTS5's bm25 with the same weights.  One
blocking connection behind a lock (the SQL is `BlockTables`', see
`registry.store` for why): an async caller is answered in a worker thread, so
no event loop waits on the network, and `Registry.now` reads the same
connection for the compiler's checks.  Migrations run under an advisory lock,
so servers starting together apply each step once.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, TypeVar

from flowforge.errors import StorageError
from flowforge.registry.model import BlockDefinition
from flowforge.registry.store import WORD_RE, SHARED, BlockStore, BlockTables
from flowforge.storage.migrate import BlockingPostgresSteps, Migration, apply_migrations, run_now

__all__ = ["PostgresBlockStore", "PostgresBlockTables", "POSTGRES_REGISTRY_MIGRATIONS"]

T = TypeVar("T")

POSTGRES_REGISTRY_MIGRATIONS: list[Migration] = [
    Migration("0001_registry_blocks", (
        """CREATE TABLE registry_versions (
            id TEXT NOT NULL, version INTEGER NOT NULL, definition TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL, created_by TEXT,
            PRIMARY KEY (id, version))""",
        """CREATE TABLE registry_heads (
            id TEXT PRIMARY KEY, version INTEGER NOT NULL, name TEXT NOT NULL,
            category TEXT NOT NULL, execution_type TEXT NOT NULL, created_by TEXT,
            tier TEXT, updated_at DOUBLE PRECISION NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0)""",
        """CREATE TABLE registry_fts (id TEXT PRIMARY KEY, document TSVECTOR NOT NULL)""",
        "CREATE INDEX registry_fts_document ON registry_fts USING GIN (document)",
    )),
    # block ids per user: the key becomes (owner, id); every stored block keeps
    # its versions, under the owner its head's definition names ('' = shared)
    Migration("0002_blocks_per_owner", (
        "ALTER TABLE registry_heads ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE registry_versions ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE registry_fts ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        """UPDATE registry_heads h
            SET owner = COALESCE(v.definition::jsonb -> 'metadata' ->> 'owner', '')
            FROM registry_versions v WHERE v.id = h.id AND v.version = h.version""",
        """UPDATE registry_versions v SET owner = h.owner
            FROM registry_heads h WHERE h.id = v.id""",
        "UPDATE registry_fts f SET owner = h.owner FROM registry_heads h WHERE h.id = f.id",
        "ALTER TABLE registry_heads DROP CONSTRAINT registry_heads_pkey, "
        "ADD PRIMARY KEY (owner, id)",
        "ALTER TABLE registry_versions DROP CONSTRAINT registry_versions_pkey, "
        "ADD PRIMARY KEY (owner, id, version)",
        "ALTER TABLE registry_fts DROP CONSTRAINT registry_fts_pkey, "
        "ADD PRIMARY KEY (owner, id)",
    )),
]

# ts_rank weights for D, C, B, A: use_when, description, tags, name (FTS5: 1, 1, 1.5, 2).
_WEIGHTS = "{0.5, 0.5, 0.75, 1.0}"
_DOCUMENT = ("setweight(to_tsvector('english', ?), 'A') || "
             "setweight(to_tsvector('english', ?), 'B') || "
             "setweight(to_tsvector('english', ?), 'C') || "
             "setweight(to_tsvector('english', ?), 'D')")


class PostgresBlockTables(BlockTables):
    """PostgreSQL tables of the registry. Thread-safe (one lock, one connection).
    Reads and deletes are `BlockTables`', with `?` turned into `%s`."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise StorageError("a registry on PostgreSQL needs psycopg: pip install "
                               "'flowforge[server]'") from None
        from flowforge.storage.postgres import split_url

        self.url = self.location = url
        conninfo, _ = split_url(url)
        self._lock = threading.RLock()
        try:
            self.db = psycopg.connect(conninfo, autocommit=True)
            self._migrate()
        except psycopg.Error as exc:
            raise StorageError(f"cannot open the block registry at {url}: {exc}") from None

    def _migrate(self) -> None:
        with self._lock:
            run_now(apply_migrations(POSTGRES_REGISTRY_MIGRATIONS, BlockingPostgresSteps(
                self.db, "registry_schema", f"the block registry at {self.url}",
                lock="hashtext('flowforge_registry')")))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def _all(self, sql: str, args: Any = ()) -> list[tuple]:
        return self.db.execute(sql.replace("?", "%s"), args).fetchall()

    def _change(self, sql: str, args: Any = ()) -> int:
        return self.db.execute(sql.replace("?", "%s"), args).rowcount

    def _transaction(self) -> Any:
        return self.db.transaction()

    _lock_head = " FOR UPDATE"

    def _index_text(self, definition: BlockDefinition, owner: str) -> None:
        self._change(f"INSERT INTO registry_fts (owner, id, document) VALUES (?, ?, {_DOCUMENT}) "
                     f"ON CONFLICT (owner, id) DO UPDATE SET document = excluded.document",
                     (owner, definition.id, definition.name, " ".join(definition.tags),
                      definition.description, definition.use_when))

    def text_search(self, query: str, limit: int = 10,
                    owners: tuple[str, ...] = (SHARED,)) -> list[tuple[str, str, float]]:
        """(owner, id, score) by ts_rank over name, tags, description and use_when,
        in the namespaces `owners` only."""
        words = [w for w in WORD_RE.findall(query.lower()) if len(w) > 1]
        if not words:
            return []
        expression = " | ".join(dict.fromkeys(words))
        with self._lock:
            rows = self.db.execute(
                "SELECT owner, id, ts_rank(%s, document, q) AS rank "
                "FROM registry_fts, to_tsquery('english', %s) AS q "
                "WHERE document @@ q AND owner = ANY(%s) ORDER BY rank DESC, id LIMIT %s",
                (_WEIGHTS, expression, list(owners), limit)).fetchall()
        return [(row[0], row[1], round(float(row[2]), 6)) for row in rows]


class PostgresBlockStore(BlockStore):
    """The registry in PostgreSQL; async callers are answered in a worker thread."""

    def __init__(self, url: str) -> None:
        super().__init__(PostgresBlockTables(url))

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(function, *args, **kwargs)
