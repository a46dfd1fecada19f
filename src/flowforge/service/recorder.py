"""Persisting a run as it happens: a subscriber of the event bus.

Every event goes to the event log.  A block's checkpoint (status, inputs,
output, error, timing) is read back as the fold of its events
(`storage/checkpoints.py`): writing it again as a row cost more than the
events.  The events of one loop turn are handed to storage as one write,
after the turn, so the scheduler never waits on the disk and no task is kept
per run (SQLite then commits every run's writes of that turn at once);
`close()` waits for the last write, so a run's record is complete when the
run returns, however it ended.  Consumers that must only see stored events
(the server's SSE) read them from storage (`Storage.follow_events`).

Environment variables are never written: the values of variables the
workflow's templates read are replaced by `***` before anything is stored.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Callable, Iterable

from flowforge.storage.base import Storage

__all__ = ["Recorder", "redactor"]

def _same(data: Any) -> Any:
    return data


def redactor(secrets: Iterable[str]) -> Callable[[Any], Any]:
    """A function replacing every secret value inside nested data by `***`."""
    values = sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4},
                    key=len, reverse=True)
    if not values:
        return _same

    def clean(data: Any) -> Any:
        if isinstance(data, str):
            for secret in values:
                if secret in data:
                    data = data.replace(secret, "***")
            return data
        if isinstance(data, dict):
            return {k: clean(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [clean(v) for v in data]
        return data

    return clean


class _Turn:
    """The recorders that got events in this loop turn, handed to storage after
    it with one callback for all of them (one per run cost a loop step each)."""

    __slots__ = ("loop", "recorders")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)           # kept by _TURNS: must not keep it alive
        self.recorders: list[Recorder] = []

    def add(self, recorder: "Recorder") -> None:
        if not self.recorders:
            self.loop().call_soon(self.flush)   # type: ignore[union-attr]
        self.recorders.append(recorder)

    def flush(self) -> None:
        recorders, self.recorders = self.recorders, []
        for recorder in recorders:
            recorder._submit()


_TURNS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turn]" = \
    weakref.WeakKeyDictionary()


def _turn(loop: asyncio.AbstractEventLoop) -> _Turn:
    turn = _TURNS.get(loop)
    if turn is None:
        turn = _TURNS[loop] = _Turn(loop)
    return turn


class Recorder:
    """Writes one run's events to storage."""

    def __init__(self, storage: Storage, run_id: str,
                 redact: Callable[[Any], Any] | None = None) -> None:
        self.storage = storage
        self.run_id = run_id
        self.redact = redact or _same
        self.pending: list[dict] = []
        self.error: BaseException | None = None
        self._turn = _turn(asyncio.get_running_loop())
        self._writes: list[asyncio.Future] = []     # handed to storage, in order
        self.dropped = False

    def drop(self) -> None:
        """Store nothing more (what is not handed to storage yet is forgotten):
        the run's lease went to another process, whose record it is now."""
        self.dropped = True
        self.pending = []

    def __call__(self, event: dict) -> None:
        """The bus subscriber: O(1), never blocks; the events of one loop turn
        are handed to storage together, after the turn."""
        if self.dropped:
            return
        if not self.pending:
            self._turn.add(self)
        self.pending.append(event)

    def _submit(self, outcome: dict[str, Any] | None = None) -> None:
        batch, self.pending = self.pending, []
        if not batch and outcome is None:
            return
        redact = self.redact
        events = batch if redact is _same else [redact(event) for event in batch]
        writes = self._writes
        try:
            write = self.storage.record_later(self.run_id, events, (),
                                              after=writes[-1] if writes else None,
                                              update=outcome)
        except Exception as exc:  # noqa: BLE001 - kept, reported by close()
            self.error = self.error or exc
            return
        writes.append(write)
        if len(writes) > 64:        # a long run: keep only what is not stored yet
            self._collect()

    def _collect(self) -> None:
        """Note the first error of the writes that are done, and forget them
        (no callback per write: that cost a loop step each)."""
        waiting = []
        for write in self._writes:
            if not write.done():
                waiting.append(write)
            elif not write.cancelled() and write.exception() is not None \
                    and self.error is None:
                self.error = write.exception()
        self._writes = waiting

    async def close(self, outcome: dict[str, Any] | None = None) -> None:
        """Store everything still pending, and `outcome` (the run row's final
        columns) in the same write: a run's last events and its status are
        stored together or not at all.  Raises the first storage error seen."""
        self._collect()
        self._submit(None if self.dropped or self.error else outcome)
        for write in self._writes:
            if not write.done():
                try:
                    await write
                except Exception:  # noqa: BLE001 - noted by _collect
                    pass
        self._collect()
        if self.error is not None:
            raise self.error
