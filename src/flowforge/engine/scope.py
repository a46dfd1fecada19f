"""A scope is one graph being run (the workflow, a loop pass, a parallel
item, a nested workflow) and what its blocks have settled to so far; the
statuses a block settles to are named here once for the scheduler, the
routing rule and the run."""

from __future__ import annotations

import asyncio
from typing import Any

from flowforge.blocks.base import ChildOutcome
from flowforge.engine.result import BlockRecord
from flowforge.workflow.graph import Graph

__all__ = ["Scope", "SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED", "WAITING", "PENDING"]

SUCCEEDED, FAILED, SKIPPED, CANCELLED = "succeeded", "failed", "skipped", "cancelled"
#: A block that raised `Suspend`: the run stops here, to be resumed.
WAITING = "waiting"
#: A block held back behind a waiting one: not run yet, never "skipped"; it
#: runs (or is skipped by the route) when the run is resumed.
PENDING = "pending"


class Scope:
    """One graph being run: the workflow itself, a loop pass, a parallel item."""

    __slots__ = ("graph", "values", "label", "pending", "active", "blocked", "missed",
                 "records", "outputs", "errors", "remaining", "done", "depth", "source")

    def __init__(self, graph: Graph, values: dict[str, Any], label: str | None,
                 depth: int = 0, source: Any = None):
        self.graph = graph
        self.values = values                   # template roots visible to this graph
        self.label = label                     # None for the top scope, else e.g. "refine[2]"
        self.pending = graph.input_counts.copy()   # dependencies not yet settled
        self.active = graph.zero_counts.copy()     # members of its join that ran
        # Made on first use: most scopes never route, fail or get awaited by a
        # second task, and thousands of concurrent runs each build scopes.
        # Block id -> (rank, reason) of a required dependency that did not run
        # (see engine/routing.py: the ranks); a skipped or pending block hands
        # its entry down to the blocks after it.
        self.blocked: dict[str, tuple[int, str]] | None = None
        self.missed: dict[str, str] | None = None  # why a join's first member did not run
        self.records: dict[str, BlockRecord] = {}
        self.outputs: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.remaining = len(graph.nodes)
        self.done: asyncio.Future | None = None    # awaited only while blocks run elsewhere
        self.depth = depth
        self.source = source                   # the document path, for nested workflows

    def outcome(self) -> ChildOutcome:
        return ChildOutcome(self.outputs, {k: r.status for k, r in self.records.items()},
                            dict(self.errors))
