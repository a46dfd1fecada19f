"""Running the tool calls of one model turn: validated, in parallel, timed.

Nothing a tool does can crash the agent's loop: an unknown tool, rejected
arguments, an exception or a timeout each become the call's result text, so
the model reads what went wrong and can try again.  Results keep the order
of the calls (the transcript must pair each result with its call).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Iterable

from flowforge.providers.base import ToolCall
from flowforge.tools.spec import Tool, ToolContext
from flowforge.tools.validation import ToolValidation, rejection_message, validate_arguments

__all__ = ["ToolOutcome", "run_tool_calls", "result_text"]


@dataclass
class ToolOutcome:
    call: ToolCall
    status: str               # ok | rejected | error
    result: Any               # the tool's value, or the message the model gets
    start: float
    end: float

    @property
    def duration_ms(self) -> float:
        return round((self.end - self.start) * 1000, 3)

    def record(self) -> dict[str, Any]:
        """The seed's toolCalls entry."""
        return {"name": self.call.name, "arguments": self.call.arguments, "result": self.result,
                "startTime": _iso(self.start), "endTime": _iso(self.end),
                "duration": self.duration_ms}


def _iso(epoch: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


def result_text(value: Any) -> str:
    """What the model reads as a tool result."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


async def _run_one(tool: Tool | None, call: ToolCall, available: Iterable[str],
                   context: ToolContext, policy: ToolValidation, timeout: float | None
                   ) -> ToolOutcome:
    start = time.time()
    if tool is None:
        message = (f"Error: there is no tool named '{call.name}'. Available tools: "
                   f"{', '.join(available) or 'none'}.")
        return ToolOutcome(call, "rejected", message, start, time.time())
    problems = validate_arguments(tool, call.arguments, policy)
    if problems:
        return ToolOutcome(call, "rejected", rejection_message(tool.name, problems,
                                                              tool.parameters), start, time.time())
    try:
        if timeout:
            value = await asyncio.wait_for(tool.execute(call.arguments, context), timeout)
        else:
            value = await tool.execute(call.arguments, context)
    except asyncio.TimeoutError:
        return ToolOutcome(call, "error", f"Error: '{call.name}' timed out after {timeout:g}s.",
                           start, time.time())
    except Exception as exc:  # noqa: BLE001 - the model reads the failure and may retry
        detail = str(exc) or type(exc).__name__
        return ToolOutcome(call, "error", f"Error: '{call.name}' failed: {detail}", start,
                           time.time())
    return ToolOutcome(call, "ok", value, start, time.time())


async def run_tool_calls(tools: dict[str, Tool], calls: list[ToolCall], context: ToolContext,
                         policy: ToolValidation | None = None, timeout: float | None = None,
                         parallel: bool = True) -> list[ToolOutcome]:
    """Execute `calls` (concurrently when `parallel`), in call order."""
    policy = policy or ToolValidation()
    names = list(tools)
    if len(calls) == 1 or not parallel:
        return [await _run_one(tools.get(c.name), c, names, context, policy, timeout)
                for c in calls]
    return list(await asyncio.gather(*(_run_one(tools.get(c.name), c, names, context, policy,
                                                timeout) for c in calls)))
