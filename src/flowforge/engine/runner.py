"""One run of a compiled workflow: inputs in, `RunResult` out.

`Run` wires the pieces the scheduler does not own: input validation, the
template scope (`input`, `vars`, `env`, `secrets`, `memory`, `user`, `run`),
nested workflows and child scopes, memory write-back, and the result.
Storage is not touched here; a recorder subscribed to the event bus persists
the run, so the engine works the same with or without a database.

What a run may read of the host follows its `Policy`: a run without the
`server_env` capability sees only its document's own `env:`, and its model
providers find keys only in the user's secrets, the document's `env:` and the
keys an administrator chose to share (`provider_keys`)."""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from flowforge.blocks.base import ChildOutcome, Suspend
from flowforge.engine.context import RunContext
from flowforge.engine.events import EventBus
from flowforge.engine.ids import new_run_id
from flowforge.engine.inputs import validate_inputs
from flowforge.engine.limits import OutputMeter, ValueLimits
from flowforge.engine.preflight import nested_problems
from flowforge.engine.result import BlockRecord, RunResult
from flowforge.engine.scheduler import CANCELLED, SUCCEEDED, Scheduler, Scope
from flowforge.errors import BlockError, FlowforgeError, InputError, Problem
from flowforge.providers.resolve import ProviderOptions, check_models
from flowforge.workflow.graph import CompiledWorkflow, Graph, Node
from flowforge.workflow.model import ModelUse
from flowforge.workflow.paths import document_root
from flowforge.workflow.policy import TRUSTED, Policy, is_provider_setting

__all__ = ["Run", "MAX_NESTING", "WorkflowResolver"]

MAX_NESTING = 8

#: (reference, the referring document's path or None) -> CompiledWorkflow (or an
#: awaitable of one: a server resolves stored workflows from its database)
WorkflowResolver = Callable[[str, Any], Any]


class EnvView(dict):
    """`{{env.X}}`: the process environment over the workflow's `env:`.

    Looked up key by key instead of copying `os.environ` (decoding every
    variable) for each of thousands of runs."""

    def get(self, key: str, default: Any = None) -> Any:
        value = os.environ.get(key)
        return value if value is not None else dict.get(self, key, default)

    def __getitem__(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return (isinstance(key, str) and key in os.environ) or dict.__contains__(self, key)

    # Enumerating (`dict(env)`, `env.items()`) sees both layers, process env winning.
    def merged(self) -> dict[str, str]:
        return {**dict(dict.items(self)), **os.environ}

    def __iter__(self):  # type: ignore[override]
        return iter(self.merged())

    def keys(self):  # type: ignore[override]
        return self.merged().keys()

    def items(self):  # type: ignore[override]
        return self.merged().items()

    def values(self):  # type: ignore[override]
        return self.merged().values()

    def __len__(self) -> int:
        return len(self.merged())

    def copy(self) -> dict[str, str]:  # type: ignore[override]
        return self.merged()


_NO_SERVICES: Mapping[str, Any] = MappingProxyType({})
_NO_SECRETS: Mapping[str, str] = MappingProxyType({})
_PROCESS_ENV = EnvView()        # shared by every run of a workflow without `env:`


class Run:
    """A single execution. Create, then `await execute()`; `cancel()` any time."""

    __slots__ = ("workflow", "doc", "run_id", "raw_inputs", "user", "memory", "bus",
                 "resolver", "model_override", "defaults", "env", "checkpoint", "services",
                 "scheduler", "status", "error", "inputs", "policy", "secrets",
                 "provider_keys", "tracer", "child_checkpoints", "budget", "resume_state",
                 "resume_at")

    def __init__(self, workflow: CompiledWorkflow, inputs: dict[str, Any] | None = None, *,
                 user: str | dict[str, Any] | None = None, run_id: str | None = None,
                 memory: dict[str, Any] | None = None, concurrency: int | None = None,
                 resolver: WorkflowResolver | None = None, model: str | None = None,
                 bus: EventBus | None = None, checkpoint: dict[str, tuple[str, Any]] | None = None,
                 services: dict[str, Any] | None = None, policy: Policy = TRUSTED,
                 secrets: Mapping[str, str] | None = None,
                 provider_keys: Mapping[str, str] | None = None,
                 child_checkpoints: Mapping[str, dict[str, tuple[str, Any]]] | None = None
                 ) -> None:
        self.workflow = workflow
        self.doc = workflow.doc
        self.run_id = run_id or new_run_id()
        self.raw_inputs = dict(inputs) if inputs else {}
        if isinstance(user, str):
            user = {"id": user}
        self.user: dict[str, Any] = dict(user or {"id": "default"})
        self.memory = dict(memory) if memory else {}
        self.bus = bus or EventBus(self.run_id)
        self.bus.run_id = self.run_id
        self.resolver = resolver
        self.model_override = model
        self.defaults: Mapping[str, Any] = self.doc.defaults     # read-only for blocks
        self.policy = policy
        if policy is TRUSTED or policy.allows("server_env"):
            self.env = EnvView(self.doc.env) if self.doc.env else _PROCESS_ENV
        else:                              # the document's own `env:` and nothing of the host
            self.env = dict(self.doc.env)
        # Plain dicts: templates descend into dicts (a run owns its copies).
        self.secrets: Mapping[str, str] = dict(secrets) if secrets else _NO_SECRETS
        self.provider_keys: Mapping[str, str] = provider_keys or _NO_SECRETS
        self.tracer: Any = None          # service.tracing.RunTracer when tracing is on
        self.budget: Any = None          # engine.budget.BudgetMeter when the run has limits
        # Resuming a `waiting` run: block id -> the state it stored when it
        # suspended (with a person's decision injected, for an approval).
        self.resume_state: dict[str, dict[str, Any]] = {}
        self.resume_at: float | None = None   # a `waiting` run: when it is due, if ever
        self.checkpoint = checkpoint
        # Resuming: blocks of loop passes and parallel items (by scope label,
        # `refine[1]`) that had succeeded before the cut are not run again.
        self.child_checkpoints = child_checkpoints
        self.services: Mapping[str, Any] = services if services is not None else _NO_SERVICES
        self.bus.limit = self.services.get("max_run_events")      # a server's cap, else None
        self.scheduler = Scheduler(self.bus, concurrency or self.doc.concurrency, RunContext)
        self.scheduler.owner = self
        if services:                       # a server's limits (else the process's)
            self.scheduler.meter = OutputMeter(ValueLimits.of(services))
        self.status = "pending"
        self.error: str | None = None
        self.inputs: dict[str, Any] = {}

    def provider_env(self, endpoint_chosen: bool = False) -> dict[str, str]:
        """Where model providers look for keys and settings.

        Trusted: the run's environment, then the user's secrets (a user's own
        key wins).  Otherwise: the host's provider *settings* (endpoints, API
        versions, `FLOWFORGE_LOCAL_*`: the administrator's configuration), the
        keys the administrator shares (`provider_keys`) unless the document
        chose the endpoint itself, then the document's `env:` and the user's
        secrets; those two may set endpoints only with `provider_endpoints`,
        so a shared key never travels to a URL a user picked."""
        if self.policy is TRUSTED or self.policy.allows("server_env"):
            env = dict(self.env)
            if self.secrets:
                env.update(self.secrets)
            return env
        env = {name: value for name, value in os.environ.items() if is_provider_setting(name)}
        if self.provider_keys and not endpoint_chosen:
            env.update(self.provider_keys)
        may_choose = self.policy.allows("provider_endpoints")
        for source in (self.doc.env, self.secrets):
            for name, value in source.items():
                if may_choose or not is_provider_setting(name):
                    env[name] = value
        return env

    def model_problems(self, nested: CompiledWorkflow | None = None) -> list[Problem]:
        """The run's models that cannot be called here (a provider key missing
        from `provider_env`, a model file that does not exist): found before
        the first block runs, not after earlier blocks ran and spent.  Every
        model the document names (`Workflow.models()`: tool blocks, fallbacks,
        embedding models included); for a `nested` workflow the models of its
        blocks (its `defaults:` and `budget:` are the parent run's)."""
        compiled = nested or self.workflow
        models = compiled.model_uses if nested is None else nested.block_model_uses
        if nested is None and self.budget is not None:   # a request's budget replaces the doc's
            models = [use for use in models if not use.where.startswith("budget.")] + [
                ModelUse("budget.on_exceed.downgrade", limit.downgrade)
                for limit in self.budget.limits if limit.downgrade]
        override: list[ModelUse] = []
        if self.model_override:            # --model replaces every block's model
            if nested is None:
                override = [ModelUse("--model", self.model_override)]
            models = [use for use in models if use.where.startswith("budget.")]
        if not models and not override:
            return []
        env = self.provider_env()
        files = self.policy is TRUSTED or self.policy.allows("server_files")
        # The document's models resolve their files as its other paths do; `--model`
        # names no document's file: relative to the working directory, as when called.
        options = ProviderOptions(env=env, base_dir=document_root(compiled.source,
                                                                  self.services))
        first: dict[tuple[Any, ...], ModelUse] = {}
        for use in models:                        # each model once, where it first appears
            first.setdefault(use[1:], use)
        if not self.policy.trusted:
            # A server's tenant: the gate says what they can do about a key (store
            # their own, or the administrator shares the server's), not to set a
            # variable in an environment they do not have.
            refused = [problem for use in first.values()
                       if (problem := self.policy.model_problem(use.model, use.where,
                                                                own_key=use.own_key))]
            if refused:
                return refused
        problems = check_models(override, ProviderOptions(env=env, base_dir=Path.cwd())
                                ) if override else []     # the caller's own choice
        return problems + check_models(list(first.values()), options, files=files)

    async def preflight(self) -> list[Problem]:
        """Everything that would fail the run once blocks had run, found before
        the first: its models, and each nested workflow (resolved as its block
        will resolve it) with that workflow's models, however deep."""
        problems = self.model_problems()
        if self.resolver is not None:
            problems += await nested_problems(self.workflow, self.resolver,
                                              lambda child: self.model_problems(child),
                                              depth=MAX_NESTING)
        return problems

    def cancel(self) -> None:
        """Cancel in-flight blocks; finished results are kept, the rest marked cancelled."""
        self.scheduler.cancel()

    async def execute(self) -> RunResult:
        started = time.time()
        # A resumed run goes on with the same events: its start says so.
        resumed = {"resumed": True} if self.checkpoint is not None else {}
        self.bus.publish("run_started", workflow_id=self.doc.id, inputs=self.raw_inputs,
                         user=self.user.get("id"), **resumed)
        top = None
        try:
            declared = self.doc.inputs
            self.inputs = validate_inputs(declared, self.raw_inputs) \
                if declared or self.raw_inputs else self.raw_inputs    # {}: nothing to check
        except InputError as exc:
            self.status, self.error = "failed", str(exc)
        # A resumed run keeps what it has: its earlier blocks already ran.
        if self.status != "failed" and not self.checkpoint and (problems := await self.preflight()):
            self.status, self.error = "failed", "; ".join(str(p) for p in problems)
        if self.status != "failed":
            values = self.root_values(self.doc, self.inputs, self.memory)
            top = Scope(self.workflow.graph, values, None,
                        source=self.workflow.source)
            try:
                await self.scheduler.run_scope(top, self.checkpoint, inline=True)
            except asyncio.CancelledError:
                # Either `cancel()` reached the block this Task was running
                # (the scope runs inline), or whoever awaited the run was
                # cancelled (Ctrl-C, a server shutting down).  Either way:
                # cancel the blocks, wait for them to settle, and return a
                # complete `cancelled` result to be recorded.  (Cancelling
                # this Task cancelled `done` itself: wait on a fresh one,
                # which the last block to settle resolves.)
                if self.scheduler.cancelled_inline:
                    self.scheduler.cancelled_inline = False
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()            # ours, not the caller's
                self.scheduler.cancel()
                if top.remaining:
                    top.done = asyncio.get_running_loop().create_future()
                    await top.done
            failures = "; ".join(f"{bid}: {err}" for bid, err in top.errors.items()) or None
            if self.scheduler.cancelled:
                self.status = "cancelled"
                self.error = "the run was cancelled"
            elif self.scheduler.suspended:
                # Blocks wait for a person or a time: the run stops here, to be
                # resumed.  A failure in another branch does not end it: the
                # independent branches still run, the waiting ones included
                # (an approval already asked stays decidable), and the run ends
                # failed once they have.  The failure is kept, not run again.
                self.status = "waiting"
                self.error = failures
                due = [s.resume_at for s in self.scheduler.suspended.values()
                       if s.resume_at is not None]
                self.resume_at = min(due) if due else None
            elif failures:
                self.status = "failed"
                self.error = failures
            else:
                self.status = "succeeded"
        result = self._result(top)
        duration_ms = round((time.time() - started) * 1000, 3)
        if self.status == "waiting":
            # Not an end: the run stops here and goes on when resumed, and its
            # one `run_finished` comes then.  Followers learn what it waits on.
            self.bus.publish("run_waiting", status="waiting", error=self.error,
                             duration_ms=duration_ms, resume_at=self.resume_at,
                             **waiting_detail(result.blocks, self.scheduler.suspended))
        else:
            self.bus.publish("run_finished", status=self.status, error=self.error,
                             duration_ms=duration_ms, outputs=result.outputs,
                             usage=result.usage, memory=result.memory)
        result.events = self.bus.events
        # Break the run <-> scheduler reference cycle so a finished run is freed
        # by reference counting at once, not by a later garbage collection.
        self.scheduler.owner = None
        return result

    # -- scopes ----------------------------------------------------------------
    def root_values(self, doc: Any, inputs: dict[str, Any], memory: dict[str, Any]
                    ) -> dict[str, Any]:
        """The namespaces a top scope's templates read (engine/alone.py adds block outputs)."""
        return {"input": inputs, "vars": doc.variables, "env": self.env, "secrets": self.secrets,
                "memory": memory, "user": self.user,
                "run": {"id": self.run_id, "workflow_id": doc.id}}

    async def run_child_scope(self, parent: Scope, graph: Graph, extra: dict[str, Any],
                              label: str) -> ChildOutcome:
        full = f"{parent.label}/{label}" if parent.label else label
        child = Scope(graph, {**parent.values, **extra}, full,
                      depth=parent.depth, source=parent.source)
        preset = self.child_checkpoints.get(full) if self.child_checkpoints else None
        await self.scheduler.run_scope(child, preset)
        return child.outcome()

    async def run_nested(self, parent: Scope, node: Node, reference: str,
                         inputs: dict[str, Any]) -> dict[str, Any]:
        if parent.depth + 1 > MAX_NESTING:
            raise BlockError(node.id, node.type, f"workflows nested deeper than {MAX_NESTING} "
                             f"levels (does '{reference}' include itself?)")
        if self.resolver is None:
            raise BlockError(node.id, node.type, "nested workflows need a workflow resolver")
        try:
            nested = self.resolver(reference, parent.source)
            if inspect.isawaitable(nested):
                nested = await nested
            nested_inputs = validate_inputs(nested.doc.inputs, inputs)
        except FlowforgeError as exc:
            raise BlockError(node.id, node.type, str(exc)) from None
        values = self.root_values(nested.doc, nested_inputs, {})
        label = f"{parent.label}/{node.id}" if parent.label else node.id
        child = Scope(nested.graph, values, label, depth=parent.depth + 1,
                      source=nested.source)
        await self.scheduler.run_scope(child)
        if child.errors:
            detail = "; ".join(f"{bid}: {err}" for bid, err in child.errors.items())
            raise BlockError(node.id, node.type, f"nested workflow '{nested.id}' failed: {detail}")
        return _outputs_of(child)

    # -- result ------------------------------------------------------------------
    def _result(self, top: Scope | None) -> RunResult:
        usage_blocks = self.scheduler.usage
        tokens = {"prompt": 0, "completion": 0, "total": 0}
        cost = 0.0
        for entry in usage_blocks.values():
            for key in tokens:
                tokens[key] += entry["tokens"][key]
            cost += entry["cost"]
        usage = {"tokens": tokens, "cost": round(cost, 10), "blocks": usage_blocks}
        if top is None:
            return RunResult(self.run_id, self.doc.id, self.status, {}, {}, {}, usage,
                             dict(self.memory), error=self.error)
        # The run is over: its own containers become the result's, uncopied.
        memory = dict(self.memory) if self.doc.memory else self.memory
        for key in self.doc.memory:
            for bid, record in top.records.items():   # settle order: the last writer wins
                output = top.outputs.get(bid)
                if record.status == SUCCEEDED and isinstance(output, dict) and key in output:
                    memory[key] = output[key]
        records = top.records
        if self.status == CANCELLED:
            for bid in top.graph.nodes:
                if bid not in records:
                    records[bid] = BlockRecord(CANCELLED, type=top.graph.nodes[bid].type)
        nodes = top.graph.nodes
        if len(records) != len(nodes) or any(a != b for a, b in zip(records, nodes)):
            records = {bid: records[bid] for bid in nodes if bid in records}  # document order
        return RunResult(self.run_id, self.doc.id, self.status, _outputs_of(top),
                         top.outputs, records, usage, memory, error=self.error)


def _outputs_of(scope: Scope) -> dict[str, Any]:
    """Response blocks that ran; when there are none, the sink blocks that succeeded."""
    graph = scope.graph
    records, outputs = scope.records, scope.outputs
    chosen = graph.response_ids or graph.sink_ids
    return {bid: outputs[bid] for bid in chosen
            if bid in outputs and records[bid].status == SUCCEEDED}


def waiting_detail(blocks: dict[str, BlockRecord], suspended: dict[str, Suspend]
                   ) -> dict[str, Any]:
    """`run_waiting`'s fields: the blocks that wait (why, and until when) and
    the blocks pending behind each, by id - so that no client parses a
    sentence to learn what the run waits for."""
    waiting_on = [{"block_id": bid, "block_type": blocks[bid].type if bid in blocks else None,
                   "reason": why.reason, "resume_at": why.resume_at}
                  for bid, why in suspended.items()]
    pending = {bid: record.waiting_for for bid, record in blocks.items()
               if record.status == "pending"}
    return {"waiting_on": waiting_on, "pending": pending}
