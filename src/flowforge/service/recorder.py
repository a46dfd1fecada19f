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

A storage failure never lets the run go on blind.  A block that can act
outside the run (a function, an HTTP call, a model...) starts only once
the events before it are stored (`gate`): what it read is durable, so a
resume never runs it again behind blocks that used its output.  When a
write fails, every later write waits behind it (storage refuses a write
made after a failed one, so the stored log has no gap), gated blocks wait,
and the recorder retries what failed with backoff for up to
FLOWFORGE_STORE_RETRY_SECONDS (30 s); then the run goes on, or is cut off
(`cut_off`, a `StoreUnreachable`): the service stops it and says how to
resume it.  Pure blocks (set, condition, response, input) are not held:
running them again is harmless.

A run that holds a lease (every stored run: the process running it) has
every write fenced by it (`lease`): a write is stored only while this
process still holds the lease.  When the store was away for longer than
the lease and another process took the run over meanwhile, the retried
write is refused (`LeaseLost`), the recorder stores nothing more, the gated
block behind it never starts, and `on_lost` stops the run here.

Environment variables are never written: the values of variables the
workflow's templates read are replaced by `***` before anything is stored.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any, Awaitable, Callable, Iterable

from flowforge.errors import StorageError
from flowforge.storage import seconds_setting
from flowforge.storage.base import LeaseLost, Storage
from flowforge.storage.grouping import WriteFuture

__all__ = ["Recorder", "redactor", "StoreUnreachable", "RETRY_ENV", "retry_seconds", "CUT_OFF"]

log = logging.getLogger("flowforge.recorder")

#: Seconds a run waits for its store to take a failed write again before it
#: is cut off (default 30).
RETRY_ENV = "FLOWFORGE_STORE_RETRY_SECONDS"
_FIRST_DELAY, _MAX_DELAY = 0.05, 2.0
#: How the error of a run cut off by its store begins.
CUT_OFF = "cut off: the run's database was unreachable"


def retry_seconds() -> float:
    """FLOWFORGE_STORE_RETRY_SECONDS, checked (StorageError naming the fix)."""
    return seconds_setting(RETRY_ENV, 30.0, "a run waits for its database to come back")


class StoreUnreachable(StorageError):
    """The store refused a run's writes for longer than the retry time: the
    run was cut off, its record stops at `stored_seq`, and it can be resumed."""

    def __init__(self, run_id: str, seconds: float, cause: BaseException,
                 stored_seq: int) -> None:
        cause_text = " ".join(str(getattr(cause, "__cause__", None) or cause).split())
        super().__init__(
            f"{CUT_OFF} for {seconds:g} s ({cause_text}); "
            f"its record stops at event {stored_seq} and nothing ran unrecorded after it; "
            f"once the database is back, finish it with `flowforge runs resume {run_id}` "
            f"(wait longer: {RETRY_ENV})")
        self.run_id, self.stored_seq = run_id, stored_seq


#: DB-API errors about the data, not the store: trying again changes nothing.
_REFUSED = frozenset({"IntegrityError", "DataError", "ProgrammingError", "NotSupportedError"})


def _retryable(error: BaseException) -> bool:
    """A failed write worth trying again: the store was away (a connection, a
    full or read-only disk, a lock), not refused data (a constraint, or ours:
    StorageError, e.g. two processes writing one run)."""
    cause = error.__cause__ if isinstance(error, StorageError) else error
    if cause is None or isinstance(cause, StorageError):
        return False
    return not any(kind.__name__ in _REFUSED for kind in type(cause).__mro__)

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


class _Stored:
    """`await` it: every event up to `seq` is stored (the coroutine is made
    only then: a block cancelled before it waits leaves none unawaited)."""

    __slots__ = ("recorder", "seq")

    def __init__(self, recorder: "Recorder", seq: int) -> None:
        self.recorder, self.seq = recorder, seq

    def __await__(self) -> Any:
        return self.recorder.until_stored(self.seq).__await__()


class Recorder:
    """Writes one run's events to storage, in order, without gaps."""

    def __init__(self, storage: Storage, run_id: str,
                 redact: Callable[[Any], Any] | None = None,
                 retry: float | None = None,
                 lease: tuple[str, float] | None = None) -> None:
        """`lease`: (owner, ttl) of the run's lease this process holds: every
        write is fenced by it (`Storage.record_later(fence=...)`)."""
        self.storage = storage
        self.run_id = run_id
        self.redact = redact or _same
        self.retry = retry_seconds() if retry is None else retry
        self.pending: list[dict] = []
        self.error: BaseException | None = None
        self._turn = _turn(asyncio.get_running_loop())
        # Handed to storage and not known stored, in order: (future, events, outcome).
        self._writes: list[tuple[asyncio.Future, list[dict], dict | None]] = []
        self._last: asyncio.Future | None = None    # the newest write: the next goes after it
        self.stored_seq = 0                         # every event up to it is stored
        self._trouble: asyncio.Future | None = None  # a failed write being retried
        self.cut_off: StoreUnreachable | None = None
        self.on_cut_off: Callable[[StoreUnreachable], None] | None = None
        self.dropped = False
        self.closed = False         # the outcome is stored: what comes later is not the run's
        self.lease = lease
        self._fenced = {"fence": lease} if lease is not None else {}   # record_later's
        self.lost: LeaseLost | None = None          # a fenced write was refused
        self.on_lost: Callable[[], None] | None = None

    def _lose(self, error: LeaseLost) -> None:
        """Another process holds the run's lease: store nothing more, stop the run."""
        if self.lost is not None:
            return
        self.lost = error
        self.drop()
        log.warning("%s", error)
        if self.on_lost is not None:
            self.on_lost()

    def drop(self) -> None:
        """Store nothing more (what is not handed to storage yet is forgotten):
        the run's lease went to another process, whose record it is now."""
        self.dropped = True
        self.pending = []

    def __call__(self, event: dict) -> None:
        """The bus subscriber: O(1), never blocks; the events of one loop turn
        are handed to storage together, after the turn."""
        if self.dropped or self.closed:
            return
        if not self.pending:
            self._turn.add(self)
        self.pending.append(event)

    def _submit(self, outcome: dict[str, Any] | None = None) -> None:
        if self._trouble is not None or self.cut_off is not None:
            return                  # queued behind the failed write (see _recover)
        batch, self.pending = self.pending, []
        if not batch and outcome is None:
            return
        redact = self.redact
        events = batch if redact is _same else [redact(event) for event in batch]
        try:
            write = self.storage.record_later(self.run_id, events, (), after=self._last,
                                              update=outcome, **self._fence())
        except Exception as exc:  # noqa: BLE001 - kept, reported by close()
            self.error = self.error or exc
            return
        self._last = write
        writes = self._writes
        writes.append((write, events, outcome))
        if len(writes) > 64:        # a long run: keep only what is not stored yet
            self._collect()

    def _collect(self) -> None:
        """Forget the writes known stored (no callback per write: that cost a
        loop step each); a failed one starts the retry."""
        writes = self._writes
        stored = 0
        for write, events, _ in writes:
            if not write.done():
                break
            if write.cancelled() or write.exception() is not None:
                self._fail(write)
                break
            stored += 1
            if events:
                self.stored_seq = events[-1]["seq"]
        del writes[:stored]

    def _fail(self, write: asyncio.Future) -> None:
        if self._trouble is not None or self.cut_off is not None:
            return
        error = write.exception() if not write.cancelled() else StorageError("cancelled")
        if isinstance(error, LeaseLost):
            self._lose(error)
            return
        if not _retryable(error):
            self.error = self.error or error
            return
        loop = asyncio.get_running_loop()
        self._trouble = loop.create_future()
        loop.create_task(self._recover(error), name=f"flowforge-recorder-{self.run_id}")

    async def _recover(self, error: BaseException) -> None:
        """Retry what failed, with backoff, until stored or `retry` seconds
        are spent; meanwhile nothing else of the run is written."""
        trouble = self._trouble
        log.warning("run %s: a write to the database failed (%s); the run's blocks wait "
                    "while it is retried for up to %g s", self.run_id,
                    " ".join(str(error).split()), self.retry)
        for write, _, _ in self._writes:        # behind the failed one: they fail too
            if not write.done():
                await asyncio.wait([write])
        events: list[dict] = []
        outcome = None
        for write, batch, update in self._writes:
            if write.cancelled() or write.exception() is not None:
                events.extend(batch)
                outcome = update or outcome
            elif batch:
                self.stored_seq = batch[-1]["seq"]
        self._writes, self._last = [], None
        deadline = time.monotonic() + self.retry
        delay = _FIRST_DELAY
        while not self.dropped:
            if time.monotonic() >= deadline:
                self.cut_off = StoreUnreachable(self.run_id, self.retry, error, self.stored_seq)
                if trouble is not None:
                    trouble.set_result(None)
                if self.on_cut_off is not None:
                    self.on_cut_off(self.cut_off)
                return
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, _MAX_DELAY)
            try:
                await self.storage.record_later(self.run_id, events, (), update=outcome,
                                                **self._fence())
            except LeaseLost as exc:    # taken over while the store was away: stop
                self._lose(exc)
                break
            except Exception as exc:  # noqa: BLE001 - the store is still away
                if not _retryable(exc):
                    self.error = self.error or exc
                    break
                error = exc
                continue
            if events:
                self.stored_seq = events[-1]["seq"]
            log.warning("run %s: the database took its writes again; the run goes on",
                        self.run_id)
            break
        self._trouble = None
        if trouble is not None:
            trouble.set_result(None)
        if self.pending and not self.dropped:
            self._turn.add(self)             # what came meanwhile, after the turn

    def _fence(self) -> dict[str, Any]:
        return self._fenced

    def gate(self, bus: Any) -> Callable[[Any, Any], Awaitable[None] | None]:
        """The scheduler's hook (`Scheduler.gate`): None when a block may start
        now, else an awaitable that ends once every event `bus` published
        before it is stored.  Pure blocks and the top scope's first blocks
        (nothing they read can be lost) never wait."""
        def gate(scope: Any, node: Any) -> Awaitable[None] | None:
            if node.info.pure or (scope.label is None and not node.inputs):
                return None
            seq = bus.last_seq
            if seq <= self.stored_seq and self._trouble is None and self.cut_off is None:
                return None
            return _Stored(self, seq)

        return gate

    async def until_stored(self, seq: int) -> None:
        """Return once every event up to `seq` is stored; StoreUnreachable once
        the run is cut off (a write failed for longer than the retry time);
        LeaseLost once another process took the run over."""
        while True:
            if self.cut_off is not None:
                raise self.cut_off
            if self.lost is not None:
                raise self.lost
            if self._trouble is not None:
                await asyncio.shield(self._trouble)
                continue
            if self.stored_seq >= seq or self.dropped:
                return
            if self.pending:
                self._submit()          # now, not after the turn: a block waits for it
            if self._trouble is not None:
                continue
            last = self._last
            if last is None or self.error is not None:
                if self.error is not None:
                    raise self.error
                return                  # nothing handed to storage is unsettled
            if not last.done():
                try:
                    # a cancelled run must not cancel the write: a group writer's
                    # future refuses it (the task's cancel arrives once it settled)
                    await (last if isinstance(last, WriteFuture) else asyncio.shield(last))
                except Exception:  # noqa: BLE001 - _collect starts its retry
                    pass
            self._collect()     # writes commit in order, each only if the one before did
            if self._trouble is None and self.error is not None:
                raise self.error
            if not last.cancelled() and last.exception() is None:
                self.stored_seq = max(self.stored_seq, seq)   # `last` held every event to seq

    async def close(self, outcome: dict[str, Any] | None = None) -> None:
        """Store everything still pending, and `outcome` (the run row's final
        columns) in the same write: a run's status is stored with its last
        events or not at all (SQLite may store a write of megabytes in parts,
        one per loop turn: the earlier parts are events the run made, stored
        in order, as they would have been a turn earlier).  Raises the first storage error seen
        (StoreUnreachable: the run was cut off and nothing more was stored)."""
        self._collect()
        submitted = False
        while self.cut_off is None and self.error is None:
            if self._trouble is not None:
                await asyncio.shield(self._trouble)
                continue
            if not submitted or self.pending:
                self._submit(None if self.dropped or submitted else outcome)
                submitted = True
                # a task the run cancelled may still settle after this (a nested
                # block's `block_cancelled`): the run's record ends with its outcome,
                # and a write after it would come after `run_finished`, under a lease
                # the outcome gives back
                self.closed = outcome is not None
            for write, _, _ in list(self._writes):
                if not write.done():
                    try:
                        await write
                    except Exception:  # noqa: BLE001 - _collect starts its retry
                        pass
            self._collect()
            if self._trouble is None and not self.pending:
                break
        if self.cut_off is not None:
            raise self.cut_off
        if self.error is not None:
            raise self.error
