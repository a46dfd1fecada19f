"""Running Pipeline JSON: the Doer is the engine.

The format, its conversion to a workflow document and its validation live
in the formats room (`formats.pipeline_json`; the thinker checks its own
wiring with them) and are re-exported here; this module adds `run_pipeline`, which the CLI
(`flowforge run pipeline.json`) and the server (`POST /api/pipeline/run`,
`POST /api/pipelines/{id}/run`) call: validated first, then run with
per-user memory loaded before and saved after, and the execution stored;
`compile_pipeline`, the same checks for a pipeline being saved; and
`PipelineState`, the doer's answer in the seed's shape:

    {pipeline_id, results, user, memory, log: [{node, block, output}]}
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from pydantic import BaseModel, Field

from flowforge.errors import ValidationFailed
from flowforge.registry import Registry, get_registry, use_registry
from flowforge.formats.pipeline_json import (Pipeline, PipelineEdge, PipelineNode,
                                             is_pipeline, pipeline_to_workflow,
                                             pipeline_warnings, validate_pipeline,
                                             workflow_to_pipeline)

__all__ = ["Pipeline", "PipelineEdge", "PipelineNode", "PipelineLogEntry", "PipelineState",
           "compile_pipeline", "is_pipeline", "pipeline_state", "pipeline_to_workflow",
           "pipeline_warnings",
           "run_pipeline", "run_pipeline_state", "validate_pipeline", "workflow_to_pipeline"]


class PipelineLogEntry(BaseModel):
    """One node that ran, in the order the nodes finished."""

    node: str = Field(description="The node's id (n1, n2, ...).")
    block: str = Field(description="The registry block the node ran.")
    output: Any = Field(None, description="Its output (null when it failed).")


class PipelineState(BaseModel):
    """What the doer returns for a pipeline run (the seed's PipelineState)."""

    pipeline_id: str = Field(description="The pipeline's id.")
    results: dict[str, Any] = Field(description="Every node's output by node id.")
    user: dict[str, Any] = Field(description="The user the pipeline ran for.")
    memory: dict[str, Any] = Field(description="The user's memory after the run.")
    log: list[PipelineLogEntry] = Field(description="The nodes that ran, in order.")


def pipeline_state(data: Pipeline | dict[str, Any], result: Any,
                   user: Mapping[str, Any] | str | None = None) -> PipelineState:
    """The PipelineState of a finished pipeline run (`result`: its RunResult)."""
    pipeline = data if isinstance(data, Pipeline) else Pipeline.model_validate(data)
    blocks = {node.id: node.block_id for node in pipeline.nodes}
    log = [PipelineLogEntry(node=event["block_id"], block=blocks[event["block_id"]],
                            output=result.results.get(event["block_id"])
                            if event["type"] == "block_succeeded" else None)
           for event in result.events
           if event.get("type") in ("block_succeeded", "block_failed")
           and not event.get("scope") and event.get("block_id") in blocks]
    shown = {"id": user} if isinstance(user, str) else dict(user or {"id": "default"})
    return PipelineState(pipeline_id=pipeline.id, results=dict(result.results), user=shown,
                         memory=dict(result.memory or {}), log=log)


def compile_pipeline(data: Pipeline | dict[str, Any], registry: Registry | None = None, *,
                     policy: Any = None, model_override: str | None = None) -> Any:
    """The compiled workflow of a pipeline: every problem located in pipeline
    terms (ValidationFailed), then the `policy` checked (CapabilityDenied)."""
    from flowforge.service.loading import compile_document
    from flowforge.workflow.loader import document_from_data
    from flowforge.workflow.policy import check_policy

    registry = registry or get_registry()
    problems = validate_pipeline(data, registry)
    if problems:
        raise ValidationFailed(problems, source="pipeline")
    with use_registry(registry):
        compiled = compile_document(document_from_data(pipeline_to_workflow(data, registry),
                                                       "pipeline"), seed_format=True)
        if policy is not None:
            check_policy(compiled, policy, model_override=model_override)
    return compiled


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
    from flowforge.service.loading import compile_document
    from flowforge.workflow.loader import document_from_data

    with use_registry(registry):
        document = compile_document(document_from_data(pipeline_to_workflow(data, registry),
                                                       "pipeline"), seed_format=True)
        return await run(document, inputs or {}, user=user, storage=storage, model=model,
                         services={**(services or {}), "registry": registry},
                         on_event=on_event,
                         **({"policy": policy} if policy is not None else {}))


async def run_pipeline_state(data: Pipeline | dict[str, Any],
                             inputs: dict[str, Any] | None = None, *,
                             user: str | dict[str, Any] | None = None,
                             **options: Any) -> PipelineState:
    """The seed's doer: run the pipeline (as `run_pipeline`, which takes the
    same `options`) and return its PipelineState.  A node that failed has
    `output: null` in the log; `run_pipeline` gives the status and errors."""
    result = await run_pipeline(data, inputs, user=user, **options)
    return pipeline_state(data, result, user)
