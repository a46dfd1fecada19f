"""The build's progress as events on an engine `EventBus`: the same stream
the CLI prints, the server sends as SSE and tests assert on.

Names and shapes are the intent-to-pipeline contract that clients of that
system already parse; every event carries `ts`, epoch seconds as those
clients read it (canonical), and `time`, the same instant as ISO 8601 in UTC.
In the order a build emits them:

- `start {intent, model}`
- `stage {stage, status: running}` (clarify, decompose, search, create, wire,
  done) and `stage_result {stage, status: done, ...}` when a stage ends
- `llm_prompt {stage, prompts, messages}` / `llm_response {stage, response,
  elapsed}`: exactly what the model was sent and answered (`prompts` and
  `messages` are the same list; `text` is `response`); between them
  `llm_progress {stage, tokens}` at most twice a second while the answer streams
- `validation {stage: decompose, valid, problems}` for each answer of the plan
- `decompose_blocks {blocks: [{suggested_id, depends_on, ...}]}`
- `search_found {suggested_id, block_id}`, `search_missing {suggested_id}`
- `creating_block {suggested_id, attempt}`, `block_test_failed {block_id,
  error, retry}`, `block_test_passed {block_id}`, `block_created {block}`,
  `block_create_failed {block_id, error}`
- `validation {stage: wire, valid, problems}` for each answer of the wiring
- last, `complete {result: {pipeline_json, status, log}, ok, error}`:
  `status` is `done` or `error`, `log` one entry per finished stage.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from flowforge.engine.events import EventBus

__all__ = ["BUILD_EVENT_TYPES", "BuildEvents", "TERMINAL_BUILD_EVENT", "utc_timestamp"]

BUILD_EVENT_TYPES = ("start", "stage", "stage_result", "llm_prompt", "llm_progress", "llm_response",
                     "decompose_blocks", "search_found", "search_missing", "creating_block",
                     "block_created", "block_test_passed", "block_test_failed",
                     "block_create_failed", "validation", "complete")
TERMINAL_BUILD_EVENT = "complete"


def utc_timestamp(now: datetime | None = None) -> str:
    """`now` (default: now), as ISO 8601 in UTC with milliseconds:
    2026-01-31T09:30:00.123Z."""
    now = now or datetime.now(timezone.utc)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class BuildEvents:
    """Publishes build events; `bus.events` keeps them all in order."""

    def __init__(self, bus: EventBus | None = None, build_id: str | None = None) -> None:
        self.build_id = build_id or f"build-{uuid.uuid4().hex[:12]}"
        self.bus = bus or EventBus(self.build_id)
        if not self.bus.run_id:
            self.bus.run_id = self.build_id

    def emit(self, event_type: str, **data: Any) -> dict[str, Any]:
        if "ts" not in data:
            now = datetime.now(timezone.utc)          # one instant, in both forms
            data["ts"] = round(now.timestamp(), 3)
            data.setdefault("time", utc_timestamp(now))
        return self.bus.publish(event_type, data.pop("block_id", None), **data)

    def stage(self, name: str, **data: Any) -> None:
        self.emit("stage", stage=name, status=data.pop("status", "running"), **data)

    def stage_result(self, name: str, **data: Any) -> None:
        self.emit("stage_result", stage=name, status=data.pop("status", "done"), **data)

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.bus.events

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [e for e in self.bus.events if e["type"] in types]
