"""Calls gathered over one turn of the event loop and answered a group at a
time: the shape PostgreSQL's group commit (`postgres_writes.py`) and its
grouped lease takes (`postgres_takes.py`) share.

The first call of a turn starts a drainer, which lets the rest of the turn
join, then answers groups until none waits: while one group is out (a round
trip to the server), the next one gathers, so a busy process sends bigger
groups instead of more of them.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

__all__ = ["TurnGatherer"]

Item = TypeVar("Item")


class TurnGatherer(Generic[Item]):
    """Subclasses answer a group (`_answer`), settle what is left when the
    drainer is cancelled with its loop (`_abandon`), and may hold some items
    back for a later group (`_next_group`)."""

    _task_name = "flowforge-turn-gatherer"

    def __init__(self) -> None:
        self._waiting: list[Item] = []
        self._drainer: asyncio.Task | None = None

    def _gather(self, item: Item) -> None:
        self._waiting.append(item)
        if self._drainer is None:
            self._drainer = asyncio.get_running_loop().create_task(self._drain(),
                                                                   name=self._task_name)

    def _next_group(self, waiting: list[Item]) -> tuple[list[Item], list[Item]]:
        """(the group to answer now, the items left for the next one)."""
        return waiting, []

    async def _answer(self, group: list[Item]) -> None:
        raise NotImplementedError

    def _abandon(self, left: list[Item], exc: BaseException) -> None:
        raise NotImplementedError

    async def _drain(self) -> None:
        group: list[Item] = []
        try:
            await asyncio.sleep(0)               # the rest of this loop turn's calls
            while self._waiting:
                group, self._waiting = self._next_group(self._waiting)
                await self._answer(group)
                group = []
        except BaseException as exc:             # cancelled with its loop
            left, self._waiting = group + self._waiting, []
            self._abandon(left, exc)
            raise
        finally:
            self._drainer = None
