"""Server-Sent Events for a run: every stored event, then the live ones.

Events are read from storage (`Storage.follow_events`), never from the
in-memory bus, so a subscriber only ever sees what is already stored and a
late or reconnecting subscriber misses nothing: each event carries its
sequence number as the SSE `id`, and a client that reconnects with
`Last-Event-ID` (browsers do it by themselves) gets exactly the events after
it.  The stream ends after `run_finished`, or after `run_waiting` when the
run waits for a person or a time: reconnecting after that event's id picks
up when the run is resumed.
"""

from __future__ import annotations

import json
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from flowforge.server.errors import ApiError
from flowforge.storage.base import Storage

__all__ = ["after_seq", "event_stream"]


def after_seq(last_event_id: str | None, after: int | None) -> int:
    """Where to resume: the `Last-Event-ID` header wins over `?after=`."""
    if last_event_id not in (None, ""):
        try:
            value = int(last_event_id)
        except ValueError:
            raise ApiError(400, f"Last-Event-ID {last_event_id!r} must be an event's sequence "
                                f"number (the `id:` of the last event received)") from None
        if not 0 <= value < 2**63:
            raise ApiError(400, "Last-Event-ID must be an event's sequence number, from 0 "
                                "to 2**63 - 1")
        return value
    return after or 0


def event_stream(storage: Storage, run_id: str, after: int, ping_seconds: float
                 ) -> EventSourceResponse:
    async def events() -> Any:
        async for event in storage.follow_events(run_id, after):
            yield ServerSentEvent(data=json.dumps(event, default=str, ensure_ascii=False),
                                  id=str(event["seq"]), event=event["type"])

    return EventSourceResponse(events(), ping=ping_seconds,
                               headers={"Cache-Control": "no-store"})
