"""The `BlockContext` the engine hands each running block.

It is deliberately small: what the block may read (its scope, the run's
defaults and environment) and the few things it may ask of the engine
(publish an event, see its successors, run a child graph or another
workflow).  Blocks never reach into the scheduler's state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from flowforge.blocks.base import ChildOutcome
from flowforge.errors import RunError
from flowforge.workflow.graph import Graph, Node

if TYPE_CHECKING:
    from flowforge.engine.runner import Run
    from flowforge.engine.scheduler import Scope

__all__ = ["RunContext"]


class RunContext:
    __slots__ = ("run", "_scope", "node", "block_id")

    def __init__(self, run: Run, scope: Scope, node: Node) -> None:
        self.run = run
        self._scope = scope
        self.node = node
        self.block_id = node.id

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def workflow_id(self) -> str:
        return self.run.workflow.id

    @property
    def scope(self) -> Mapping[str, Any]:
        return self._scope.values

    @property
    def scope_label(self) -> str | None:
        return self._scope.label

    @property
    def defaults(self) -> Mapping[str, Any]:
        return self.run.defaults

    @property
    def model_override(self) -> str | None:
        """`--model` from the command line: replaces every LLM block's model."""
        return self.run.model_override

    @property
    def resume_state(self) -> dict[str, Any] | None:
        """What this block stored when it suspended the run (`Suspend.state`),
        with any injected decision, when the run is being resumed; else None."""
        if self._scope.label is not None:
            return None
        return self.run.resume_state.get(self.block_id)

    @property
    def budget(self) -> Any:
        """The run's `BudgetMeter` (limits and spending so far), or None."""
        return self.run.budget

    @property
    def env(self) -> Mapping[str, str]:
        return self.run.env

    @property
    def policy(self) -> Any:
        """The run's capability policy (`workflow.policy.Policy`)."""
        return self.run.policy

    def provider_env(self, endpoint_chosen: bool = False) -> dict[str, str]:
        """Where this run's model providers find keys (see `Run.provider_env`)."""
        return self.run.provider_env(endpoint_chosen)

    def trace_headers(self) -> dict[str, str]:
        """`traceparent` of this block's span when the run is traced, for the
        HTTP calls it makes (so the service called joins the trace)."""
        tracer = self.run.tracer
        if tracer is None:
            return {}
        value = tracer.traceparent(self.block_id, self._scope.label)
        return {"traceparent": value} if value else {}

    @property
    def idempotency_key(self) -> str:
        """The same for every execution of this block in this run (its scope
        included): a block run again after a crash or a takeover sends the key it
        sent before, so the service it calls can tell a repeat from a new request."""
        import hashlib

        text = f"{self.run.run_id}/{self._scope.label or ''}/{self.block_id}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def user(self) -> Mapping[str, Any]:
        return self.run.user

    @property
    def services(self) -> Mapping[str, Any]:
        """Objects the caller made available to blocks (storage, knowledge, ...)."""
        return self.run.services

    @property
    def source_dir(self) -> Any:
        """The folder this block's relative paths resolve against
        (`workflow.paths.document_root`): its document's folder, or on a
        server the files root; None on a server that has no root for them."""
        from flowforge.workflow.paths import document_root

        return document_root(self._scope.source, self.run.services)

    def block_data(self) -> dict[str, Any]:
        """Outputs of the blocks of this block's graph that have run, by id (Sim's blockData)."""
        values = self._scope.values
        return {key: values[key] for key in self._scope.graph.nodes if key in values}

    def name_mapping(self) -> dict[str, str]:
        """Normalised block name -> id for this block's graph (Sim's blockNameMapping)."""
        return dict(self._scope.graph.names)

    def emit(self, event_type: str, **data: Any) -> None:
        bus = self.run.bus
        if bus.limit is not None and bus.over_limit():
            raise RunError(bus.over_limit())          # the block fails, named
        bus.publish(event_type, self.block_id, scope=self._scope.label, **data)

    def successors(self) -> list[Node]:
        nodes = self._scope.graph.nodes
        return [nodes[dep] for dep in self.node.dependants]

    async def run_children(self, graph: Graph, extra_scope: dict[str, Any],
                           label: str) -> ChildOutcome:
        return await self.run.run_child_scope(self._scope, graph, extra_scope, label)

    async def run_workflow(self, reference: str, inputs: dict[str, Any]) -> dict[str, Any]:
        return await self.run.run_nested(self._scope, self.node, reference, inputs)
