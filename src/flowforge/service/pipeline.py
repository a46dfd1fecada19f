"""Running Pipeline JSON: the Doer is the engine.

The format, its conversion to a workflow document and its validation live
in `thinker.pipeline` (the thinker checks its own wiring with them) and are
re-exported here; this module adds `run_pipeline`, which the CLI
(`flowforge run pipeline.json`) and the server (`POST /api/pipeline/run`)
call: validated first, then run with per-user memory loaded before and
saved after, and the execution stored.
"""

from __future__ import annotations

from typing import Any, Callable

from flowforge.errors import ValidationFailed
from flowforge.registry import Registry, get_registry, use_registry
from flowforge.thinker.pipeline import (Pipeline, PipelineEdge, PipelineNode, is_pipeline,
                                        pipeline_to_workflow, validate_pipeline,
                                        workflow_to_pipeline)

__all__ = ["Pipeline", "PipelineEdge", "PipelineNode", "is_pipeline", "pipeline_to_workflow",
           "run_pipeline", "validate_pipeline", "workflow_to_pipeline"]


async def run_pipeline(data: Pipeline | dict[str, Any], inputs: dict[str, Any] | None = None, *,
                       user: str | dict[str, Any] | None = None, storage: Any = None,
                       model: str | None = None, registry: Registry | None = None,
                       on_event: Callable[[dict], None] | None = None,
                       policy: Any = None, services: dict[str, Any] | None = None) -> Any:
    """Validate and run a pipeline; returns the RunResult. Raises
    ValidationFailed (located in pipeline terms) before anything runs.
    `policy` (a workflow.policy.Policy; None: trusted) limits what it may reach.
    `storage` takes what `service.runs.run` takes (None: the default database)."""
    from flowforge.service.runs import run

    registry = registry or get_registry()
    problems = validate_pipeline(data, registry)
    if problems:
        raise ValidationFailed(problems, source="pipeline")
    document = pipeline_to_workflow(data, registry)
    with use_registry(registry):
        return await run(document, inputs or {}, user=user, storage=storage, model=model,
                         services={**(services or {}), "registry": registry},
                         on_event=on_event,
                         **({"policy": policy} if policy is not None else {}))
