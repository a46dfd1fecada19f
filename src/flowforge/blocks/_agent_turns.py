"""The agent loop's rules for one turn's tool calls, apart from the loop.

`run_agent` (agent.py) drives the conversation; these decide what a turn's
calls become: fresh ids, a repeat or an over-limit call refused without
running, a finishing call made too early, a required tool re-asked for by
name, and how an outcome is recorded and shown.  Each is small and pure
enough to read (and test) on its own.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from flowforge.providers.base import LLMResponse, ToolCall
from flowforge.tools.executor import ToolOutcome, result_text

__all__ = ["with_ids", "record_outcome", "short", "REASK", "reask", "spend_reask",
           "early_finish", "call_key", "repeats", "over_limit", "with_refusals", "last_error",
           "finish_output", "guided_turn"]


def with_ids(tool_calls: list[ToolCall], used: set[str]) -> list[ToolCall]:
    """A missing or repeated call id (scripted and local models number calls
    per turn) is replaced, so each result pairs with its own call."""
    out = []
    for call in tool_calls:
        call_id = call.id
        if not call_id or call_id in used:
            call_id = f"call_{len(used)}"
            while call_id in used:
                call_id += "_"
        used.add(call_id)
        out.append(dataclasses.replace(call, id=call_id))     # keeps provider `meta`
    return out


def record_outcome(context: Any, outcome: ToolOutcome, records: list[dict[str, Any]],
            succeeded: set[str]) -> None:
    entry = outcome.record()
    records.append(entry)
    if outcome.status == "ok":
        succeeded.add(outcome.call.name)
    context.emit("tool_called", name=outcome.call.name, arguments=outcome.call.arguments,
                 status=outcome.status, duration_ms=outcome.duration_ms,
                 result=short(outcome.result))


def short(value: Any, limit: int = 4000) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return value if len(text) <= limit else text[:limit] + "..."


REASK = ("Step {step} of {steps}: you answered without calling {missing}. The expected tool "
          "now is '{expected}': call it with the right arguments, then continue.")


def reask(missing: list[str], required: list[str], template: str | None = None) -> str:
    """The feedback naming the missing tool(s), the current step and the expected tool."""
    expected = missing[0]
    values = {"missing": ", ".join(f"'{name}'" for name in missing), "expected": expected,
              "step": required.index(expected) + 1 if expected in required else 1,
              "steps": len(required)}
    try:
        return (template or REASK).format(**values)
    except (KeyError, IndexError, ValueError):
        return REASK.format(**values)


def spend_reask(reasks: dict[str, int], missing: list[str], block: Any, allowed: int,
           records: list[dict[str, Any]]) -> None:
    """Use one re-ask of the first missing tool, or fail when it has none left."""
    name = missing[0]
    if reasks.get(name, 0) <= 0:
        failed = [r for r in records if r["name"] == name]
        why = (f"; it was called but failed: {str(failed[-1]['result'])[:300]}" if failed
               else f" (it was told {allowed} time(s) and still did not call it)")
        raise block(f"the model answered without calling the required tool '{name}'{why}"
                    + (f"; also missing: {', '.join(missing[1:])}" if missing[1:] else ""))
    reasks[name] -= 1


def early_finish(finish: str | None, calls: list[ToolCall], required: list[str],
                  succeeded: set[str]) -> list[str] | None:
    """The required tools still missing when the model calls `finish` too early."""
    if not finish or not any(call.name == finish for call in calls):
        return None
    called_now = {call.name for call in calls}
    missing = [name for name in required
               if name != finish and name not in succeeded and name not in called_now]
    return missing or None


def call_key(call: ToolCall) -> str:
    return call.name + json.dumps(call.arguments, sort_keys=True, default=str)


def repeats(calls: list[ToolCall], done: set[str], required: list[str],
             succeeded: set[str]) -> dict[str, str]:
    """Calls identical to one that already succeeded (a small model's loop): not run
    again; the model is told where the result is and what comes next."""
    pending = [name for name in required if name not in succeeded]
    refused = {}
    for call in calls:
        if call_key(call) in done:
            after = (f" Next, call '{pending[0]}'." if pending else
                     " Use it to continue.")
            refused[call.id] = (f"You already called '{call.name}' with these arguments; its "
                                f"result is above.{after}")
    return refused


def over_limit(calls: list[ToolCall], spent: Any, limits: dict[str, int],
                required: list[str], succeeded: set[str]) -> dict[str, str]:
    """Calls of a tool whose `tool_call_limits` is spent: not run; the model is
    told to go on with what it has."""
    pending = [name for name in required if name not in succeeded]
    after = f" Next, call '{pending[0]}'." if pending else " Use them to continue."
    return {call.id: (f"'{call.name}' may be called {limits[call.name]} time(s) here and its "
                      f"results are above.{after}") for call in calls if spent(call.name)}


def with_refusals(calls: list[ToolCall], outcomes: list[ToolOutcome],
                   refused: dict[str, str]) -> list[ToolOutcome]:
    """The outcomes in call order, the refused calls answered with their message."""
    done = iter(outcomes)
    now = time.time()
    return [ToolOutcome(call, "rejected", refused[call.id], now, now) if call.id in refused
            else next(done) for call in calls]


def last_error(outcomes: list[ToolOutcome], name: str | None) -> str:
    failed = [o for o in outcomes if o.call.name == name and o.status != "ok"]
    return str(failed[-1].result) if failed else "unknown"


def finish_output(outcome: ToolOutcome) -> tuple[str, dict[str, Any]]:
    """The answer given through the finish tool: its text and its fields."""
    result = outcome.result
    fields: dict[str, Any] = dict(outcome.call.arguments or {})
    if isinstance(result, dict):
        fields.update(result)
        metadata = result.get("metadata")
        if isinstance(metadata, dict) and "sources" in metadata:
            fields["sources"] = metadata["sources"]
        text = result.get("formatted_response") or result_text(result)
    else:
        text = result_text(result)
    fields.pop("content", None)
    return str(text), fields


async def guided_turn(calls: Any, tool: Any, temperature: float | None,
                      purpose: str) -> LLMResponse | None:
    """The finishing tool's call written in its guided form (`tools.spec.GuidedAnswer`),
    for a model that asks for it (`Provider.guided_answers`); None when the tool has
    no such form now, or the answer cannot become its arguments (the call is then
    asked for as it is)."""
    form = tool.guided() if getattr(tool, "guided", None) is not None else None
    if form is None or not calls.guided():
        return None
    said = await calls(form.messages, response_format=form.schema, temperature=temperature,
                       max_tokens=form.max_tokens, purpose=purpose)
    try:
        arguments = form.arguments(json.loads(said.text))
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return dataclasses.replace(said, text="", tool_calls=[ToolCall("", tool.name, arguments)])
