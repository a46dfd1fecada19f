"""The engine: scheduler, run context, events, results."""

from flowforge.engine.events import EVENT_TYPES, EventBus
from flowforge.engine.inputs import validate_inputs
from flowforge.engine.result import BlockRecord, RunResult
from flowforge.engine.runner import MAX_NESTING, Run, WorkflowResolver

__all__ = ["BlockRecord", "EVENT_TYPES", "EventBus", "MAX_NESTING", "Run", "RunResult",
           "WorkflowResolver", "validate_inputs"]
