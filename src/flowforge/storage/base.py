"""The storage interface: one abstract class, one module per back end, chosen
by the database URL (`sqlite:///path.db`, `postgresql://...`).

Every back end must pass the same conformance suite (`tests/storage/`).  The
methods are async because the server back end talks to PostgreSQL over the
network; the SQLite back end answers inline, which is faster than a thread
hop for a local file.

Rows are plain dicts with JSON-able values.  Times are epoch seconds.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

__all__ = ["Storage", "Migration", "RUN_FIELDS", "BLOCK_FIELDS"]

#: Columns of a run row, in order.
RUN_FIELDS = ("run_id", "workflow_id", "workflow_version", "user_id", "status", "inputs",
              "outputs", "usage", "memory", "error", "document", "created_at", "started_at",
              "finished_at")
#: Columns of a block row (one per block execution scope, e.g. "" or "refine[2]").
BLOCK_FIELDS = ("run_id", "scope", "block_id", "type", "status", "inputs", "output", "error",
                "reason", "started_at", "finished_at", "duration_ms")


@dataclass(frozen=True)
class Migration:
    """One named, ordered schema step. Applied once, recorded by name."""

    name: str
    statements: tuple[str, ...]


class Storage(abc.ABC):
    """Where runs, their events and block results, and per-user memory live."""

    url: str

    # -- lifecycle --------------------------------------------------------------
    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> "Storage":
        await self.open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- runs -------------------------------------------------------------------
    @abc.abstractmethod
    async def create_run(self, run: dict[str, Any]) -> None:
        """Insert a run row (keys from RUN_FIELDS; missing ones are NULL)."""

    @abc.abstractmethod
    async def update_run(self, run_id: str, **fields: Any) -> None:
        """Update some columns of a run."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    async def list_runs(self, *, workflow_id: str | None = None, status: str | None = None,
                        user_id: str | None = None, limit: int = 50, offset: int = 0
                        ) -> list[dict[str, Any]]:
        """Newest first, without the `document` column."""

    # -- events and block checkpoints ---------------------------------------------
    @abc.abstractmethod
    async def record(self, run_id: str, events: list[dict[str, Any]],
                     blocks: list[dict[str, Any]]) -> None:
        """Append events and upsert block rows in one transaction: a block's
        checkpoint and the event announcing it are stored together or not at all."""

    @abc.abstractmethod
    async def get_events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """Events with seq > after_seq, in order."""

    @abc.abstractmethod
    async def get_blocks(self, run_id: str) -> list[dict[str, Any]]:
        """Block rows in the order they were first recorded."""

    # -- per-user memory ----------------------------------------------------------
    @abc.abstractmethod
    async def get_memory(self, user_id: str, keys: list[str] | None = None) -> dict[str, Any]: ...

    @abc.abstractmethod
    async def save_memory(self, user_id: str, values: dict[str, Any]) -> None: ...
