"""One block of a workflow run by itself: the editor's "test this block".

The block runs on a `Run`'s own scheduler, so with that run's policy,
budget, limits, event bus, retries and timeout, exactly the code a run
would call.  What it reads of other blocks is given (`values`: sample
outputs, or a past run's) instead of computed, and every other block of
its scope counts as settled before it starts: the edges it walks when it
settles lead to no block that could start, so nothing else runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from flowforge.engine.runner import Run
from flowforge.engine.scope import Scope
from flowforge.workflow.graph import Graph

__all__ = ["run_alone", "AloneResult"]


@dataclass
class AloneResult:
    """How the one block ended: its record's fields, its usage, the events it made."""

    status: str
    output: Any
    error: str | None
    duration_ms: float | None
    usage: dict[str, Any] | None
    events: list[dict[str, Any]] = field(default_factory=list)


async def run_alone(run: Run, graph: Graph, block_id: str, inputs: dict[str, Any],
                    values: dict[str, Any]) -> AloneResult:
    """Run `block_id` of `graph` (the workflow's, or a container's children)
    under `run`, its templates reading the run's namespaces (`inputs` already
    checked) plus `values` (block outputs by id and name, `loop`)."""
    run.inputs = inputs
    scope_values = run.root_values(run.doc, inputs, run.memory)
    scope_values.update(values)
    scope = Scope(graph, scope_values, None, source=run.workflow.source)
    for nid in scope.pending:               # below zero: never queued (as a checkpoint's)
        scope.pending[nid] = -1
    scope.remaining = 1
    if graph.nodes[block_id].joins:          # its join's members are given, not run
        scope.active[block_id] = 1
    scheduler = run.scheduler
    scheduler.queue.append((scope, block_id))
    try:
        await scheduler.run_scope(scope, inline=True)
    except asyncio.CancelledError:           # the caller went away: stop the block too
        scheduler.cancel()
        raise
    finally:
        scheduler.owner = None               # break the run <-> scheduler cycle
    record = scope.records[block_id]
    duration = None if record.started_at is None or record.finished_at is None \
        else round((record.finished_at - record.started_at) * 1000, 3)
    return AloneResult(record.status, scope.outputs.get(block_id), record.error, duration,
                       scheduler.usage.get(block_id), list(run.bus.events))
