"""Running Pipeline JSON: the Doer is the engine.

What the intent-to-pipeline application (`flowforge.apps.thinker`) needs of
the service, and nothing else: `run_pipeline`, which the CLI (`flowforge
build --run`) and the server (`POST /api/pipeline/run`,
`POST /api/pipelines/{id}/run`) call: validated first, then run with
per-user memory loaded before and saved after, and the execution stored;
`compile_pipeline`, the same checks for a pipeline being saved;
`run_pipeline_state`, a run answered as the doer's PipelineState; and
`automate`, build then run.  The format is `formats.pipeline_json`'s, the
builder and the PipelineState are the application's.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from flowforge.apps.thinker.pipeline import PipelineState, pipeline_state
from flowforge.errors import ValidationFailed
from flowforge.formats.pipeline_json import Pipeline, pipeline_to_workflow, validate_pipeline
from flowforge.registry import Registry, get_registry, use_registry

__all__ = ["automate", "compile_pipeline", "run_pipeline", "run_pipeline_state"]


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


async def automate(intent: str, inputs: dict[str, Any] | None = None, *,
                   model: str | None = None, run_model: str | None = None,
                   user: str | dict[str, Any] | None = None, storage: Any = None,
                   registry: Registry | None = None,
                   on_event: Callable[[dict], None] | None = None,
                   policy: Any = None, services: dict[str, Any] | None = None,
                   env: Mapping[str, str] | None = None, owner: str | None = None
                   ) -> dict[str, Any]:
    """Build a pipeline for `intent`, then run it with `inputs`.
    `run_model` (default: `model`) answers the pipeline's LLM blocks; `policy`
    (None: trusted) limits what the generated pipeline may reach of the host."""
    # the builder loads on first use: a process that only runs pipelines never needs it
    from flowforge.apps.thinker.builder import build_pipeline

    registry = registry or get_registry()
    result = await build_pipeline(intent, model=model, registry=registry, on_event=on_event,
                                  env=env, owner=owner)
    answer: dict[str, Any] = {"build": result.to_dict(), "run": None}
    if result.ok and result.pipeline is not None:
        run = await run_pipeline(result.pipeline, inputs or {}, user=user, storage=storage,
                                 model=run_model or model, registry=registry, on_event=on_event,
                                 policy=policy, services=services)
        answer["run"] = run.to_dict()
        answer["run"]["error"] = run.error
    return answer
