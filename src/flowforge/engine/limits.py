"""The size limits on what a run makes: the text one block renders from its
templates, one block's output, and everything a run's blocks output together
(what its record stores).

Every value a run makes is bounded, and a bound reached fails the block with
a located error before the memory is spent (DESIGN.md, "Nothing is cut
silently").  The defaults are far beyond what a real workflow makes (a
16 MB prompt, a 64 MB output, 512 MB in one run's record) and low enough
that one tenant's doubling template cannot take a 24 GB server down.  Each
is set per process by its environment variable (`flowforge serve` and the
pool's workers read theirs), or per run by the caller's `services`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from flowforge.errors import ValueTooLarge

__all__ = ["ValueLimits", "OutputMeter", "size_of", "LIMIT_SETTINGS", "VALUE_SETTING",
           "forget_process_limits"]

#: setting -> (environment variable, default in millions of characters)
LIMIT_SETTINGS = {
    "max_value_mb": ("FLOWFORGE_MAX_VALUE_MB", 16),
    "max_output_mb": ("FLOWFORGE_MAX_OUTPUT_MB", 64),
    "max_run_mb": ("FLOWFORGE_MAX_RUN_MB", 512),
}


_VARIABLES = tuple(variable for variable, _ in LIMIT_SETTINGS.values())


@dataclass(frozen=True, slots=True)
class ValueLimits:
    """The three limits, in characters (a character of text is about a byte)."""

    value: int
    output: int
    run: int

    @classmethod
    def of(cls, services: Mapping[str, Any] | None = None) -> "ValueLimits":
        """A run's limits: its services' (a server's settings), else the
        environment's, else the defaults.  Every run asks: the process's own
        are read from the environment once (reading it cost every run 3-5 µs)."""
        if not services or not any(setting in services for setting in LIMIT_SETTINGS):
            # (a recorded run's services hold its storage, not limits: the process's)
            if not _PROCESS:               # read once per process (`forget_process_limits`)
                _PROCESS.append(cls._made(None))
            return _PROCESS[0]
        return cls._made(services)

    @classmethod
    def _made(cls, services: Mapping[str, Any] | None) -> "ValueLimits":
        chosen = []
        for setting, (variable, default) in LIMIT_SETTINGS.items():
            value = (services or {}).get(setting)
            if value is None:
                raw = os.environ.get(variable, "").strip()
                try:
                    value = float(raw) if raw else default
                except ValueError:
                    value = default
            chosen.append(max(1, int(float(value) * 1_000_000)))
        return cls(*chosen)


#: The process's limits, read from its environment on first use (see `of`).
_PROCESS: list[ValueLimits] = []


def forget_process_limits() -> None:
    """Read the environment's limits again at the next run (after changing them)."""
    _PROCESS.clear()


def size_of(value: Any, limit: int) -> int:
    """About how many characters `value` takes as JSON, walked until the count
    passes `limit` (then a number over it, not the whole size): the cost of a
    check is the size of what is checked, never more."""
    if type(value) is str:
        return len(value)
    total = 0
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or kind is bytes:
            total += len(item) + 2
        elif kind is dict:
            total += 2
            for key, inner in item.items():
                total += len(key) + 4 if type(key) is str else 8
                push(inner)
        elif kind is list or kind is tuple:
            total += 2 + len(item)             # its commas: counted before it is walked
            if total > limit:
                return total
            stack.extend(item)
        else:
            total += 8
        if total > limit:
            return total
    return total


def _setting(name: str) -> str:
    return f"{LIMIT_SETTINGS[name][0]}, in MB"


VALUE_SETTING, OUTPUT_SETTING, RUN_SETTING = (
    _setting(name) for name in ("max_value_mb", "max_output_mb", "max_run_mb"))


class OutputMeter:
    """Counts what a run's blocks output, against the output and run limits."""

    __slots__ = ("limits", "produced")

    def __init__(self, limits: ValueLimits) -> None:
        self.limits = limits
        self.produced = 0

    def over(self, value: Any) -> ValueTooLarge | None:
        """A block's output over its limit, or the run's outputs together over
        theirs; else None (and the output counts towards the run's)."""
        kind = type(value)
        if kind is not dict and kind is not list and kind is not str or not value:
            return None
        limits = self.limits
        size = size_of(value, limits.output)
        if size > limits.output:
            return ValueTooLarge("the block's output", size, limits.output, OUTPUT_SETTING)
        self.produced += size
        if self.produced > limits.run:
            return ValueTooLarge("what the run's blocks output together", self.produced,
                                 limits.run, RUN_SETTING)
        return None
