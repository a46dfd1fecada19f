"""What a back end gives the SQL that the shared stores write once.

The stores (`records`, `workflows`, `users`, like `access`, `pipelines`,
`schedules`) write their SQL once with `?` placeholders; each back end runs it
(PostgreSQL turns `?` into `%s`) and supplies the little that differs between
the two dialects: the column that orders a table's rows as they were inserted
(SQLite's `rowid`, PostgreSQL's `position` or the key) and how to read one
JSON field.  Everything else in a back-end module is connection handling and
write batching.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol, Sequence

__all__ = ["SQLBackend", "SQLTransaction"]


class SQLTransaction(Protocol):
    """Statements run in one transaction (`SQLBackend._sql_transaction`)."""

    async def rows(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run one statement; its rows as dicts (none for a write without RETURNING)."""

    async def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row of arguments."""


class SQLBackend:
    """The primitives a back end implements for the shared stores."""

    #: Per table, the column (or columns) that orders its rows as they were
    #: inserted, for ties: `runs`, `run_blocks`, `users`, `api_keys`.
    _inserted_order: dict[str, str] = {}

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        """One statement that reads; its rows as dicts."""
        raise NotImplementedError

    async def _sql_values(self, sql: str, args: Any = ()) -> list[Any]:
        """One statement that reads one column; its values (no dict per row: a
        run's events are read this way, thousands at a time)."""
        raise NotImplementedError

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        """One statement that writes, committed; the number of rows it changed."""
        raise NotImplementedError

    def _sql_transaction(self) -> contextlib.AbstractAsyncContextManager[SQLTransaction]:
        """Several statements committed together, or not at all."""
        raise NotImplementedError

    def _json_text(self, column: str, key: str) -> str:
        """SQL reading the top-level field `key` of the JSON text in `column`."""
        raise NotImplementedError

    def _join(self, write: Any) -> asyncio.Future:
        """Hand a run's write (`grouping.Write`) to the back end's group writer:
        groups commit one after the other, in the order writes were made."""
        raise NotImplementedError
