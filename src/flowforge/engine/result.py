"""`RunResult`: what a run returns, and exactly what `flowforge run --json` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = ["RunResult", "BlockRecord", "iso_time", "add_usage"]


def iso_time(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds")


@dataclass(slots=True)
class BlockRecord:
    """How one block went. Times are epoch seconds; `to_dict` renders ISO 8601."""

    status: str
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    type: str = ""
    reason: str | None = None          # why it was skipped, or is pending
    waiting_for: str | None = None     # pending: the waiting block it runs after

    @property
    def duration_ms(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return round((self.finished_at - self.started_at) * 1000, 3)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "started_at": iso_time(self.started_at),
                "finished_at": iso_time(self.finished_at), "duration_ms": self.duration_ms,
                "error": self.error}


@dataclass(slots=True)
class RunResult:
    """The outcome of one run. Field names and meanings are fixed by DESIGN.md."""

    run_id: str
    workflow_id: str
    status: str                               # succeeded | failed | cancelled | waiting
    outputs: dict[str, Any]                   # response blocks that ran, else sinks
    results: dict[str, Any]                   # every block's output by id (blockData)
    blocks: dict[str, BlockRecord]
    usage: dict[str, Any]
    memory: dict[str, Any]
    events: list[dict] = field(default_factory=list)
    error: str | None = None                  # why the run failed, when it did (not in JSON);
    #                                           a waiting run's failures in other branches

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "status": self.status,
            "outputs": self.outputs,
            "results": self.results,
            "blocks": {bid: record.to_dict() for bid, record in self.blocks.items()},
            "usage": self.usage,
            "memory": self.memory,
            "events": self.events,
        }


def add_usage(usage: dict[str, dict[str, Any]], block_id: str, output: dict) -> None:
    """Count a block's `tokens` and `cost` (as its output reports them) in the
    run's usage per block."""
    tokens = output.get("tokens")
    cost = output.get("cost")
    entry = usage.setdefault(block_id, {"tokens": {"prompt": 0, "completion": 0, "total": 0},
                                        "cost": 0.0})
    if isinstance(tokens, dict):
        for key in ("prompt", "completion", "total"):
            value = tokens.get(key)
            if isinstance(value, (int, float)):
                entry["tokens"][key] += value
    if isinstance(cost, dict):
        cost = cost.get("total")
    if isinstance(cost, (int, float)):
        entry["cost"] += cost
