"""One migration runner for every store: the runs' storage, the block registry
and the knowledge bases, each on SQLite and on PostgreSQL.

A store's schema is an ordered list of named steps (`Migration`), each
applied once and recorded by name in the store's own record table
(`schema_migrations`, `registry_schema`, `kb_schema`: read as the stores
always wrote them, so a database made before this module opens without
running anything again).  The runner knows the order; a small adapter per
back end knows the rest: how to read the record, how to hold the one-writer
lock for a transaction, how to run a statement.

Several processes opening a new database at once apply each step once: every
step runs in its own transaction under a lock across processes (SQLite's
`BEGIN IMMEDIATE`, PostgreSQL's advisory lock), which first reads the record
again: a step another process applied meanwhile is skipped.  A database that
is up to date is only read, so a read-only one still opens.

The runner is async; a synchronous store drives it with `run_now` (its
adapter never waits, so the coroutine ends at its first step): one copy of
the logic, not a sync and an async twin.
"""

from __future__ import annotations

import abc
import contextlib
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Coroutine, Sequence, TypeVar

from flowforge.errors import StorageError

__all__ = ["Migration", "MigrationBackend", "SQLiteSteps", "PostgresSteps",
           "BlockingPostgresSteps", "apply_migrations", "run_now"]

T = TypeVar("T")


@dataclass(frozen=True)
class Migration:
    """One named, ordered schema step. Applied once, recorded by name."""

    name: str
    statements: tuple[str, ...]


class MigrationBackend(abc.ABC):
    """What the runner needs of a back end.  `table` is the store's record of
    applied steps, created as `table (columns)`; `mark` its placeholder;
    `where` names the database in messages."""

    mark = "?"

    def __init__(self, conn: Any, table: str, columns: str, where: str) -> None:
        self.conn, self.table, self.columns, self.where = conn, table, columns, where
        #: Set when the database cannot be written: the runner only checks that
        #: nothing is pending, and names what is when something is.
        self.read_only = False

    @abc.abstractmethod
    async def applied(self) -> set[str] | None:
        """The names recorded; None when the record table does not exist yet."""

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """One transaction, holding the back end's lock across processes."""

    @abc.abstractmethod
    async def execute(self, sql: str, args: Sequence[Any] = ()) -> None: ...


async def apply_migrations(steps: Sequence[Migration], backend: MigrationBackend
                           ) -> list[str]:
    """Apply the steps `backend` has not recorded, in order, each in its own
    transaction; the names of those this call applied."""
    done = await backend.applied()
    pending = [step for step in steps if step.name not in (done or ())]
    if not pending:
        return []
    if backend.read_only:
        raise StorageError(f"{backend.where} is read-only and lacks {len(pending)} schema "
                           f"step(s) ({pending[0].name}, ...): open it once where it can be "
                           f"written, to bring it up to date")
    if done is None:
        async with backend.transaction():
            await backend.execute(f"CREATE TABLE IF NOT EXISTS {backend.table} "
                                  f"({backend.columns})")
    applied = []
    for step in pending:
        async with backend.transaction():
            if step.name in (await backend.applied() or ()):
                continue                      # another process applied it meanwhile
            for statement in step.statements:
                await backend.execute(statement)
            await backend.execute(f"INSERT INTO {backend.table} VALUES ({backend.mark}, "
                                  f"{backend.mark})", (step.name, time.time()))
        applied.append(step.name)
    return applied


def run_now(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never waits (`apply_migrations` with a
    synchronous adapter), for a synchronous caller."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError("run_now: the coroutine waited; use an adapter that does not")


class SQLiteSteps(MigrationBackend):
    """A `sqlite3` connection in autocommit mode (`isolation_level=None`);
    `BEGIN IMMEDIATE` takes the file's write lock, so other processes wait."""

    def __init__(self, conn: sqlite3.Connection, table: str, where: str,
                 columns: str = "name TEXT PRIMARY KEY, applied_at REAL NOT NULL") -> None:
        super().__init__(conn, table, columns, where)

    async def applied(self) -> set[str] | None:
        if self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                             (self.table,)).fetchone() is None:
            return None
        return {row[0] for row in self.conn.execute(f"SELECT name FROM {self.table}")}

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> None:
        self.conn.execute(sql, args)


class PostgresSteps(MigrationBackend):
    """A psycopg 3 `AsyncConnection` in autocommit mode; `lock` is the SQL of
    the advisory lock's key, held to the end of each transaction."""

    mark = "%s"

    def __init__(self, conn: Any, table: str, where: str, lock: str,
                 columns: str = "name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL"
                 ) -> None:
        super().__init__(conn, table, columns, where)
        self.lock = lock

    async def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        cursor = await self.conn.execute(sql, args)
        return await cursor.fetchall() if cursor.description else []

    def _transaction(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self.conn.transaction()

    async def applied(self) -> set[str] | None:
        (found,), = await self._rows("SELECT to_regclass(%s) IS NOT NULL", (self.table,))
        if not found:
            return None
        return {row[0] for row in await self._rows(f"SELECT name FROM {self.table}")}

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self._transaction():
            await self._rows(f"SELECT pg_advisory_xact_lock({self.lock})")
            yield

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> None:
        await self._rows(sql, args)


class BlockingPostgresSteps(PostgresSteps):
    """The same on a synchronous psycopg `Connection` (the block registry's):
    nothing here waits, so `run_now` drives the runner."""

    async def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        cursor = self.conn.execute(sql, args)
        return cursor.fetchall() if cursor.description else []

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[None]:
        with self.conn.transaction():
            yield
