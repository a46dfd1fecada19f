"""Scripted-model plans for the applications' tests."""

from __future__ import annotations

from typing import Any

__all__ = ["Plan", "call"]


class Plan:
    """A scripted model playing `steps` in order, one per model turn, and
    keeping every request it was sent (`seen`) for assertions."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = list(steps)
        self.seen: list[list[Any]] = []
        self.tools_seen: list[list[str]] = []     # the tool names offered, per turn

    def __call__(self, messages, tools):
        self.seen.append(list(messages))
        self.tools_seen.append([tool.name for tool in tools or []])
        if not self.steps:
            raise AssertionError("the model was asked more often than the plan allows")
        step = self.steps.pop(0)
        return step(messages) if callable(step) else step


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}
