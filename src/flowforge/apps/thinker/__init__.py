"""From a sentence to a pipeline: the clarifier asks what it must, the
thinker decomposes, searches the registry, writes and tests the missing
blocks, and wires the Pipeline JSON that the engine runs.
`builder.build_pipeline` is the thinker with the registry and the events
chosen (what the CLI and the routes call), `pipeline.PipelineState` the
doer's answer; running a pipeline is the service's (`service.pipeline`).  (No module here is named after a name
below: `build` is the function, so the builder is `builder`.)

The names below are imported on first use, not with the package: a process
that only reads Pipeline JSON (`flowforge.formats.pipeline_json`: every pool
worker, every `flowforge run x.json`) then does not load the builder and its
schema checker (~85 ms of its start)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowforge.lazy import lazy_attributes

__all__ = ["BUILD_EVENT_TYPES", "BuildEvents", "BuildResult", "ClarifyResult",
           "MAX_USER_MESSAGES", "ThinkerError", "build", "clarify", "default_build_model",
           "format_intent"]

_WHERE = {"MAX_USER_MESSAGES": "clarifier", "ClarifyResult": "clarifier",
          "clarify": "clarifier", "format_intent": "clarifier",
          "BUILD_EVENT_TYPES": "events", "BuildEvents": "events",
          "ThinkerError": "llm", "default_build_model": "llm",
          "BuildResult": "thinker", "build": "thinker"}

__getattr__ = lazy_attributes(__name__, _WHERE)

if TYPE_CHECKING:
    from flowforge.apps.thinker.clarifier import (MAX_USER_MESSAGES, ClarifyResult, clarify,
                                                  format_intent)
    from flowforge.apps.thinker.events import BUILD_EVENT_TYPES, BuildEvents
    from flowforge.apps.thinker.llm import ThinkerError, default_build_model
    from flowforge.apps.thinker.thinker import BuildResult, build
