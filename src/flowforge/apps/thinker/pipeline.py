"""The doer's answer: a finished pipeline run as the seed's PipelineState.

    {pipeline_id, results, user, memory, log: [{node, block, output}]}

The format, its conversion to a workflow document and its validation live
in the formats room (`formats.pipeline_json`; the thinker checks its own
wiring with them).  Running a pipeline is the service's
(`service.pipeline.run_pipeline`: the Doer is the engine); what a run of
one means to the user who asked for it is shaped here.
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import BaseModel, Field

from flowforge.formats.pipeline_json import Pipeline

__all__ = ["PipelineLogEntry", "PipelineState", "pipeline_state"]


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

