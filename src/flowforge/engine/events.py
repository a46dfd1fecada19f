"""One event stream per run, any number of consumers.

Producers (the scheduler, blocks, providers) publish plain dicts; consumers
(the CLI's live view, the stored log, SSE, WebSocket, webhooks, tracing)
subscribe without the producers knowing them.  Publishing is synchronous and
cheap: a callback consumer must not block; an async consumer takes a queue
through `stream()`.

A user's observer (`on_event`) joins through `observe()`: it watches the run
and must never change how the run ends, so what it raises is logged, not
propagated.  The engine's own consumers (the recorder, tracing) use
`subscribe()`: their failures are the run's failures.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Callable

__all__ = ["EventBus", "EVENT_TYPES", "TERMINAL_EVENT", "STOP_EVENTS", "Observer"]

log = logging.getLogger("flowforge.events")

EVENT_TYPES = ("run_started", "block_started", "block_succeeded", "block_failed",
               "block_skipped", "block_cancelled", "block_waiting", "block_retrying",
               "llm_delta", "llm_restart", "tool_called", "progress", "budget_exceeded",
               "budget_capped", "budget_downgrade", "approval_requested", "approval_decided",
               "warning", "run_waiting", "run_finished")
TERMINAL_EVENT = "run_finished"
#: The events after which a run's stream has nothing more for now: its end,
#: or a stop to wait for a person or a time (the run goes on when resumed,
#: and a follower picks up after the stop's seq).
STOP_EVENTS = frozenset({"run_finished", "run_waiting"})

Subscriber = Callable[[dict], None]


class EventBus:
    """Collects a run's events in order and fans them out to subscribers."""

    __slots__ = ("run_id", "events", "_subscribers", "_seq", "limit")

    def __init__(self, run_id: str = "", start_seq: int = 0) -> None:
        self.run_id = run_id
        self.events: list[dict] = []
        # A tuple, replaced on (un)subscribe: publishing iterates a snapshot, so a
        # consumer may unsubscribe from inside its callback without skipping another.
        self._subscribers: tuple[Subscriber, ...] = ()
        self._seq = start_seq          # a resumed run continues its stored sequence
        # A server's cap on one run's events (`max_run_events`): past it no block
        # starts and no block streams (`over_limit`); what settles still reports.
        self.limit: int | None = None

    def over_limit(self) -> str | None:
        """Why this run may publish no more: past its event limit; else None."""
        if self.limit is None or self._seq < self.limit:
            return None
        return (f"the run reached this server's limit of {self.limit} events per run "
                f"(FLOWFORGE_MAX_RUN_EVENTS, `flowforge serve --max-run-events`): fewer loop "
                f"passes or parallel items, or an administrator raises the limit")

    @property
    def last_seq(self) -> int:
        """The seq of the last event published (0 before the first)."""
        return self._seq

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(event)` for every later event; returns an unsubscribe.
        What it raises reaches the publisher (the run): for the engine's own
        consumers.  A user's callback belongs in `observe`."""
        self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            subscribers = list(self._subscribers)
            if callback in subscribers:
                subscribers.remove(callback)
                self._subscribers = tuple(subscribers)

        return unsubscribe

    def observe(self, callback: Subscriber) -> Callable[[], None]:
        """`subscribe` for a user's observer (`on_event`): an exception it raises
        is logged and the run goes on (see `Observer`); returns an unsubscribe."""
        return self.subscribe(Observer(callback))

    def publish(self, event_type: str, block_id: str | None = None, **data: Any) -> dict:
        self._seq += 1
        event = {"seq": self._seq, "type": event_type, "run_id": self.run_id,
                 "time": time.time()}
        if block_id is not None:
            event["block_id"] = block_id
        if data:
            event.update(data)
        self.events.append(event)
        for callback in self._subscribers:
            callback(event)
        return event

    def publish_block(self, event_type: str, block_id: str, scope: str | None,
                      key: str, value: Any, key2: str, value2: Any, now: float) -> dict:
        """`publish` for the scheduler's two per-block events, without the
        keyword-argument dict: the same event, built in one step."""
        self._seq += 1
        event = {"seq": self._seq, "type": event_type, "run_id": self.run_id, "time": now,
                 "block_id": block_id, "scope": scope, key: value, key2: value2}
        self.events.append(event)
        for callback in self._subscribers:
            callback(event)
        return event

    async def stream(self, replay: bool = True) -> AsyncIterator[dict]:
        """Every event (past ones first when `replay`), ending after run_finished
        or run_waiting (this run object publishes nothing after either)."""
        queue: asyncio.Queue[dict] = asyncio.Queue()
        if replay:
            for event in self.events:
                queue.put_nowait(event)
        unsubscribe = self.subscribe(queue.put_nowait)
        try:
            while True:
                event = await queue.get()
                yield event
                if event["type"] in STOP_EVENTS:
                    return
        finally:
            unsubscribe()


class Observer:
    """A user's event callback, guarded: a buggy observer must not fail the run
    it watches, nor keep other consumers (the stored record) from an event.

    The first exception it raises is logged once, with its traceback, the
    observer's name and the event's type; later ones only add to `failures`
    (a callback that breaks on every `llm_delta` would otherwise flood the log).
    It keeps being called, not detached: observers usually break on one kind of
    event (a field only `tool_called` has) and detaching would also hide the
    events they handle fine - the `run_finished` a progress view or a test
    waits for above all."""

    __slots__ = ("callback", "name", "failures")

    def __init__(self, callback: Subscriber) -> None:
        self.callback = callback
        self.name = _name_of(callback)
        self.failures = 0

    def __call__(self, event: dict) -> None:
        try:
            self.callback(event)
        except Exception:  # noqa: BLE001 - the observer's bug, not the run's
            self.failures += 1
            if self.failures == 1:
                log.exception("the on_event observer %s raised on a %r event of run %s; the "
                              "run goes on and the observer keeps receiving events (its "
                              "later errors are not logged)", self.name, event.get("type"),
                              event.get("run_id") or "?")


def _name_of(callback: Any) -> str:
    """`module.qualname` of a function or bound method, else the object's repr."""
    name = getattr(callback, "__qualname__", None)
    if name is None:
        return repr(callback)
    module = getattr(callback, "__module__", None)
    return f"{module}.{name}" if module else name
