"""Where registry blocks live: every version of every definition, the
current head of each, and a full-text index (embeddings live in the knowledge
layer, see `registry.search`).

`BlockStore` is the one interface, async like the other stores
(`storage.base`, `knowledge.store`), with one module per back end chosen by
the URL: `store_sqlite.py` (the default: the same database as the runs,
`FLOWFORGE_DATABASE_URL`, unless `FLOWFORGE_REGISTRY_URL` names another) and
`store_postgres.py`.  Each keeps its own tables and ordered migration list
(recorded in `registry_schema`), so the storage layer and the registry never
edit each other's migrations.  Both pass the same conformance tests
(`tests/registry`).

Why a blocking connection underneath, and how synchronous callers read.
The registry is one per process (`registry.get_registry`), reached from every
event loop (the CLI's, the server's, a worker's, each test's) and from code
that is not async: the compiler checks `uses:` blocks while it validates a
document (`RegistryBlock.check`, the Pipeline JSON converter).  A psycopg
`AsyncConnection` belongs to one loop, so an async-only store would need a
connection per loop and still a blocking one for the compiler.  Instead the
SQL is written once, synchronously, over one connection behind a lock
(`BlockTables`), and the two kinds of caller reach the same tables:

- async callers (the server's routes, the thinker, a `uses:` block running)
  through `BlockStore`, which answers the way its back end should: SQLite
  inline (a local file answers in microseconds, as the runs' SQLite storage
  does), PostgreSQL in a worker thread, so no event loop waits on the network;
- document-time checks through `Registry.now`, a read-only sync facade over
  the same tables (`find` and `ids` only: a read, never a twin of the logic).

A block is keyed by (owner, id): owner '' holds the shared blocks (the
bundled library, an administrator's, the local user's), a server user's id
holds that user's own.  Two users may hold the same id without either
learning of the other; `registry.owned` layers a user's namespace over the
shared one.  Migration 0002 moved every stored block to the owner its
definition names (`metadata.owner`), all versions of an id together.
"""

from __future__ import annotations

import abc
import copy
import json
import re
import time
from typing import Any, Callable, TypeVar

from flowforge.errors import NotFound, StorageError
from flowforge.registry.model import BlockDefinition

__all__ = ["BlockStore", "BlockTables", "SHARED", "block_store_from_url", "fts_query",
           "owner_of", "WORD_RE"]

T = TypeVar("T")

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


class BlockTables:
    """The registry's SQL, written once for both back ends: `?` placeholders
    (the PostgreSQL tables turn them into `%s`), `deleted` as 0/1.  Synchronous,
    on one DB-API connection behind a lock (thread-safe); a back end adds the
    connection, the transaction, the full-text index and its search."""

    _lock: Any
    #: where the tables are: a SQLite path (`:memory:`) or a PostgreSQL URL
    location: str

    def close(self) -> None:
        raise NotImplementedError

    def text_search(self, query: str, limit: int = 10,
                    owners: tuple[str, ...] = (SHARED,)) -> list[tuple[str, str, float]]:
        """(owner, id, score), best first, in the namespaces `owners` only."""
        raise NotImplementedError

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


class BlockStore(abc.ABC):
    """The block library's store: every method async.  `tables` is the SQL
    it answers from (also what `Registry.now` reads synchronously); a back
    end only says how an async caller reaches them (`call`)."""

    def __init__(self, tables: Any) -> None:
        self.tables = tables

    @abc.abstractmethod
    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`function(*args, **kwargs)` (a synchronous use of `tables`), run the
        way this back end answers an event loop."""

    def over(self, tables: Any) -> BlockStore:
        """The same back end answering from other tables (a user's view of
        these, `registry.owned`)."""
        view = copy.copy(self)
        view.tables = tables
        return view

    @property
    def location(self) -> str:
        """A SQLite path (`:memory:`) or a PostgreSQL URL."""
        return str(self.tables.location)

    @property
    def owners(self) -> tuple[str, ...]:
        """The namespaces this store's reads see, the one that wins first."""
        return tuple(getattr(self.tables, "owners", (SHARED,)))

    def close(self) -> None:
        self.tables.close()

    async def put(self, definition: BlockDefinition) -> BlockDefinition:
        """Store a new version (1 for a new id); returns it with `version` set.
        A definition identical to the current head is not stored again."""
        return await self.call(self.tables.put, definition)

    async def delete(self, block_id: str, owner: str = SHARED) -> None:
        """Hide a block (its versions stay); NotFound if there is none."""
        await self.call(self.tables.delete, block_id, owner=owner)

    async def get(self, block_id: str, version: int | None = None,
                  owner: str = SHARED) -> BlockDefinition | None:
        return await self.call(self.tables.get, block_id, version, owner=owner)

    async def versions(self, block_id: str, owner: str = SHARED) -> list[dict[str, Any]]:
        return await self.call(self.tables.versions, block_id, owner=owner)

    async def ids(self, **filters: Any) -> list[str]:
        """The ids of one namespace, filtered by `category`, `created_by`,
        `execution_type` (`owner`: the namespace, default shared)."""
        return await self.call(self.tables.ids, **filters)

    async def keys(self) -> list[tuple[str, str]]:
        """(owner, id) of every block, every namespace (what search indexes)."""
        return await self.call(self.tables.keys)

    async def text_search(self, query: str, limit: int = 10,
                          owners: tuple[str, ...] = (SHARED,)) -> list[tuple[str, str, float]]:
        """(owner, id, score), best first, in the namespaces `owners` only."""
        return await self.call(self.tables.text_search, query, limit, owners)


def block_store_from_url(url: str) -> BlockStore:
    """The store for `url`: a SQLite URL or path (`:memory:`), or PostgreSQL."""
    if url.startswith(("postgresql://", "postgres://")):
        from flowforge.registry.store_postgres import PostgresBlockStore
        return PostgresBlockStore(url)
    if "://" in url and not url.startswith("sqlite:"):
        raise StorageError(f"the block registry needs SQLite or PostgreSQL, not '{url}': "
                           f"set FLOWFORGE_REGISTRY_URL=sqlite:///path/registry.db or "
                           f"postgresql://...")
    from flowforge.registry.store_sqlite import SQLiteBlockStore
    if url.startswith("sqlite:///"):
        return SQLiteBlockStore(url[len("sqlite:///"):] or ":memory:")
    if url.startswith("sqlite:"):
        return SQLiteBlockStore(":memory:")
    return SQLiteBlockStore(url)
