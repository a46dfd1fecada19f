"""From a sentence to a pipeline: the clarifier asks what it must, the
thinker decomposes, searches the registry, writes and tests the missing
blocks, and wires the Pipeline JSON that the engine runs.

The names below are imported on first use, not with the package: a process
that only reads Pipeline JSON (`flowforge.thinker.pipeline`: every pool
worker, every `flowforge run x.json`) then does not load the builder and its
schema checker (~85 ms of its start)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["BUILD_EVENT_TYPES", "BuildEvents", "BuildResult", "ClarifyResult",
           "MAX_USER_MESSAGES", "ThinkerError", "build", "clarify", "default_build_model",
           "format_intent"]

#: the module of this package each public name comes from
_HOMES = {"MAX_USER_MESSAGES": "clarifier", "ClarifyResult": "clarifier",
          "clarify": "clarifier", "format_intent": "clarifier",
          "BUILD_EVENT_TYPES": "events", "BuildEvents": "events",
          "ThinkerError": "llm", "default_build_model": "llm",
          "BuildResult": "thinker", "build": "thinker"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from flowforge.thinker.clarifier import (MAX_USER_MESSAGES, ClarifyResult, clarify,
                                             format_intent)
    from flowforge.thinker.events import BUILD_EVENT_TYPES, BuildEvents
    from flowforge.thinker.llm import ThinkerError, default_build_model
    from flowforge.thinker.thinker import BuildResult, build
