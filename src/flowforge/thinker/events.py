"""The build's progress as events on an engine `EventBus`: the same stream
the CLI prints, the server sends as SSE and tests assert on.

Types, in the order a build emits them: `stage` (clarify, decompose,
search, create, wire, done), `llm_prompt` / `llm_response` (exactly what the
model was sent and answered), `decompose_blocks`, `search_found`,
`search_missing`, `creating_block`, `block_test_failed`,
`block_test_passed`, `block_created`, `block_create_failed`, `validation`,
and last `complete` (ok or not: `error` says why).
"""

from __future__ import annotations

import uuid
from typing import Any

from flowforge.engine.events import EventBus

__all__ = ["BUILD_EVENT_TYPES", "BuildEvents", "TERMINAL_BUILD_EVENT"]

BUILD_EVENT_TYPES = ("stage", "llm_prompt", "llm_response", "decompose_blocks", "search_found",
                     "search_missing", "creating_block", "block_created", "block_test_passed",
                     "block_test_failed", "block_create_failed", "validation", "complete")
TERMINAL_BUILD_EVENT = "complete"


class BuildEvents:
    """Publishes build events; `bus.events` keeps them all in order."""

    def __init__(self, bus: EventBus | None = None, build_id: str | None = None) -> None:
        self.build_id = build_id or f"build-{uuid.uuid4().hex[:12]}"
        self.bus = bus or EventBus(self.build_id)
        if not self.bus.run_id:
            self.bus.run_id = self.build_id

    def emit(self, event_type: str, **data: Any) -> dict[str, Any]:
        return self.bus.publish(event_type, data.pop("block_id", None), **data)

    def stage(self, name: str, **data: Any) -> None:
        self.emit("stage", stage=name, **data)

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.bus.events

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [e for e in self.bus.events if e["type"] in types]
