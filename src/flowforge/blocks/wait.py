"""`wait`: pause the run for a duration (`seconds`) or until a time (`until`).

A short wait (at most `sleep_limit` seconds, 30 by default) just sleeps, and
cancelling the run interrupts it.  A longer one frees the process: the block
raises `Suspend`, the run ends `waiting` with `resume_at` set and nothing held
in memory, and `flowforge runs resume-due` (or a server's resumer) continues
it when it is due; resumed early, it waits again for what is left.  The end
time is fixed when the block first runs, so resuming never restarts the wait.
A run without storage has nowhere to be resumed from, and a loop pass or a
parallel item cannot stop alone: there the wait always sleeps.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any

from pydantic import Field, model_validator

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output, Suspend
from flowforge.blocks.type_table import register_block

__all__ = ["WaitConfig", "WaitBlock", "parse_time"]


def parse_time(text: str) -> float:
    """Epoch seconds of an ISO 8601 time; a time without a zone is UTC."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"'{text}' is not an ISO 8601 time (write e.g. "
                         f"2026-01-31T09:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


class WaitConfig(BlockConfig):
    seconds: float | None = Field(None, ge=0)
    """How long to wait, in seconds."""
    until: str | None = None
    """Wait until this ISO 8601 time (UTC unless it names a zone); a past time does not wait."""
    sleep_limit: float = Field(30.0, ge=0)
    """Waits up to this many seconds sleep in the process; longer ones stop the run
    (`waiting`) and free the process until the wait is over."""

    @model_validator(mode="after")
    def _one_of(self) -> "WaitConfig":
        if (self.seconds is None) == (self.until is None):
            raise ValueError("give exactly one of `seconds` (e.g. `seconds: 3600`) or "
                             "`until` (e.g. `until: '2026-01-31T09:00:00Z'`)")
        if self.until is not None:
            parse_time(self.until)
        return self


@register_block
class WaitBlock(BlockType):
    type_name = "wait"
    Config = WaitConfig
    outputs = {
        "until": Output("string", "When the wait ended (ISO 8601, UTC)."),
        "waited_seconds": Output("number", "How long this run of the block waited."),
    }
    holds_slot = False          # a wait uses no resources: it never blocks other blocks

    @classmethod
    async def run(cls, context: BlockContext, config: WaitConfig) -> Any:
        now = time.time()
        state = getattr(context, "resume_state", None) or {}
        due = state.get("resume_at")
        if not isinstance(due, (int, float)):
            due = now + config.seconds if config.seconds is not None \
                else parse_time(config.until or "")
        started = state.get("started_at", now)
        left = due - now
        # Only the run's top level can stop and be resumed; inside a loop pass or
        # a parallel item (or a run without storage) a long wait sleeps.
        can_leave = context.services.get("storage") is not None and \
            getattr(context, "scope_label", None) is None
        if left > config.sleep_limit and can_leave:
            context.emit("progress", message=f"waiting until {_iso(due)}: the run stops and "
                                             f"is resumed then")
            raise Suspend({"resume_at": due, "until": _iso(due), "started_at": started},
                          due, f"waiting until {_iso(due)}")
        if left > 0:
            await asyncio.sleep(left)
        return {"until": _iso(due), "waited_seconds": round(max(0.0, time.time() - started), 3)}
