"""Start a coroutine at once, and make a Task only if it actually suspends.

Most blocks in a chain (set, condition, small functions) finish without ever
waiting; giving each its own Task costs a loop iteration per block, which is
most of the overhead of a long chain.  Python 3.12 has eager tasks built in;
on 3.11 this is the same idea in a few lines: step the coroutine once, and if
it yields, hand the rest of it to a Task through a delegating awaitable that
forwards every send and throw, so cancellation and exceptions behave exactly
as they would in a plain Task.
"""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, Generator

__all__ = ["start_eagerly", "Finished"]


class Finished:
    """A coroutine that completed during its first step."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Resume:
    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine, first: Any) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.first
        self.first = None
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # noqa: BLE001 - forwarded, as a Task would
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _drive(resume: _Resume) -> Any:
    return await resume


def start_eagerly(coro: Coroutine) -> Finished | asyncio.Task:
    """Run `coro` until its first suspension. Returns Finished(value) if it
    completed; raises what it raised; else returns the Task now driving it."""
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return Finished(stop.value)
    return asyncio.get_running_loop().create_task(_drive(_Resume(coro, first)))
