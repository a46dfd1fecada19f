"""From a sentence to a pipeline: the clarifier asks what it must, the
thinker decomposes, searches the registry, writes and tests the missing
blocks, and wires the Pipeline JSON that the engine runs."""

from flowforge.thinker.clarifier import MAX_USER_MESSAGES, ClarifyResult, clarify, format_intent
from flowforge.thinker.events import BUILD_EVENT_TYPES, BuildEvents
from flowforge.thinker.llm import ThinkerError, default_build_model
from flowforge.thinker.thinker import BuildResult, build

__all__ = ["BUILD_EVENT_TYPES", "BuildEvents", "BuildResult", "ClarifyResult",
           "MAX_USER_MESSAGES", "ThinkerError", "build", "clarify", "default_build_model",
           "format_intent"]
