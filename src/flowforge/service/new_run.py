"""A run's set-up: the `Run` object a compiled workflow becomes, with its
resolver for nested workflows, its budget meter, its tracer, and the values
no record may show.  Kept apart from `service.runs` (which stores and drives
runs) because the pool's enqueue path and the stored-workflow service need
pieces of it without the recording machinery.
"""

from __future__ import annotations

from typing import Any, Callable

from flowforge.engine.budget import BudgetLimit, BudgetMeter, limit_from, usage_of_output
from flowforge.engine.events import EventBus
from flowforge.engine.result import RunResult
from flowforge.engine.runner import Run
from flowforge.errors import NotFound
from flowforge.service.loading import registered_workflow, resolve_workflow
from flowforge.service.recorder import redactor
from flowforge.service.tracing import tracer_for_run, tracing_enabled
from flowforge.workflow.graph import CompiledWorkflow, Graph
from flowforge.workflow.policy import TRUSTED, Policy, check_policy, looks_like_path

__all__ = ["new_run", "guarded_resolver", "idempotency_columns", "hidden_values",
           "hide_secrets", "run_meter"]


def _env_refs(graph: Graph) -> set[str]:
    names: set[str] = set()
    for node in graph.nodes.values():
        names |= node.env_refs
        if node.children is not None:
            names |= _env_refs(node.children)
    return names


def guarded_resolver(policy: Policy, stored: Callable[[str], Any] | None = None,
                     model_override: str | None = None,
                     services: dict[str, Any] | None = None) -> Callable[[str, Any], Any]:
    """How a run that is not trusted finds nested workflows: a file only with
    the `server_files` capability; an id among the user's stored workflows
    (`stored`, `id` or `id@version`) or those the host program registered.
    Every nested workflow meets the same capability check as the run's own."""
    async def resolve(reference: str, base: Any) -> CompiledWorkflow:
        if looks_like_path(reference):
            policy.check_workflow_ref(reference, "with.workflow")
            nested = resolve_workflow(reference, base, services)
        else:
            nested = registered_workflow(reference)
            if nested is None and stored is not None:
                try:
                    nested = await stored(reference)
                except NotFound:
                    nested = None
            if nested is None:
                raise NotFound(f"no stored workflow '{reference}': save it first "
                               f"(POST /api/workflows), then name it by id or `id@version`")
        check_policy(nested, policy, reference, model_override)
        return nested

    return resolve


def idempotency_columns(idempotency: tuple[str, str] | None) -> dict[str, str]:
    """The run row's columns for a submission's (idempotency key, fingerprint)."""
    if idempotency is None:
        return {}
    key, fingerprint = idempotency
    return {"idempotency_key": key, "request_fingerprint": fingerprint}


def hidden_values(run_obj: Run) -> list[str]:
    """Values no record, answer or trace may show: the environment variables
    the workflow reads, the user's secrets, shared provider keys."""
    hidden = [run_obj.env[name] for name in _env_refs(run_obj.workflow.graph)
              if name in run_obj.env]
    hidden.extend(run_obj.secrets.values())
    hidden.extend(run_obj.provider_keys.values())
    return hidden


def new_run(compiled: CompiledWorkflow, inputs: dict[str, Any] | None, *, user: Any,
             run_id: str | None, model: str | None, concurrency: int | None,
             services: dict[str, Any] | None, on_event: Callable[[dict], None] | None,
             checkpoint: dict[str, tuple[str, Any]] | None = None,
             child_checkpoints: dict[str, dict[str, tuple[str, Any]]] | None = None,
             start_seq: int = 0,
             policy: Policy = TRUSTED, secrets: dict[str, str] | None = None,
             provider_keys: dict[str, str] | None = None,
             stored_workflows: Callable[[str], Any] | None = None,
             traceparent: str | None = None, budget: Any = None,
             budget_limits: list[BudgetLimit] | None = None) -> Run:
    if policy is TRUSTED and stored_workflows is None:
        def resolver(reference: str, base: Any) -> CompiledWorkflow:
            return resolve_workflow(reference, base, services)
    else:
        resolver = guarded_resolver(policy, stored_workflows, model, services)
    run_obj = Run(compiled, inputs, user=user, run_id=run_id, model=model,
                  concurrency=concurrency, resolver=resolver,
                  bus=EventBus(start_seq=start_seq), services=services, checkpoint=checkpoint,
                  child_checkpoints=child_checkpoints,
                  policy=policy, secrets=secrets, provider_keys=provider_keys)
    run_obj.budget = run_meter(compiled, budget, budget_limits, checkpoint, child_checkpoints)
    if tracing_enabled():                   # off: nothing subscribes, a run pays nothing
        tracer = tracer_for_run(run_obj.run_id, compiled.id, redactor(hidden_values(run_obj)),
                                remote_parent=traceparent)
        run_obj.tracer = tracer
        run_obj.bus.subscribe(tracer.defer)    # traced after the loop's turn
    if on_event is not None:
        run_obj.bus.observe(on_event)
    return run_obj


def run_meter(compiled: CompiledWorkflow, budget: Any, extra: list[BudgetLimit] | None,
           checkpoint: dict[str, tuple[str, Any]] | None,
           child_checkpoints: dict[str, dict[str, tuple[str, Any]]] | None
           ) -> BudgetMeter | None:
    """The run's budget: the request's `budget` (it replaces the document's),
    else the document's, plus the server's limits (`extra`); what blocks
    restored from checkpoints spent counts as already used."""
    limits = [limit for limit in (limit_from(budget if budget is not None
                                             else compiled.doc.budget),) if limit is not None]
    limits.extend(extra or ())
    if not limits:
        return None
    meter = BudgetMeter(limits)
    for preset in (checkpoint or {}, *(child_checkpoints or {}).values()):
        for status, output in preset.values():
            if status == "succeeded":
                meter.add(*usage_of_output(output))
    return meter


def hide_secrets(run_obj: Run, result: RunResult) -> RunResult:
    """A user's secrets (and shared provider keys) never appear in what a run
    returns either: every value becomes `***` in outputs, results, events and
    errors (a workflow that echoes `{{secrets.X}}` shows `***`)."""
    values = [*run_obj.secrets.values(), *run_obj.provider_keys.values()]
    if not values:
        return result
    hide = redactor(values)
    result.outputs, result.results = hide(result.outputs), hide(result.results)
    result.events, result.memory = hide(result.events), hide(result.memory)
    result.error = hide(result.error)
    for record in result.blocks.values():
        record.error = hide(record.error)
    return result
