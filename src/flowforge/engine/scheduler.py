"""The scheduler: a ready queue over the compiled graph.

A block starts the moment its last dependency settles (never level by level),
up to the run's concurrency limit.  What it then does is the rule users rely
on, the same in every scope (the workflow, a loop pass, a parallel item, a
nested workflow):

- Every dependency of a block (each block it reads in a template or an
  expression, each `after:` entry) is required: the block runs only if each
  one *ran* - succeeded and, if it chooses routes (router, condition,
  approval), chose this block.  Otherwise the block is skipped, with the
  reason ("not on the chosen route", "dependency 'x' failed"), and so are the
  blocks after it.  Reading an always-run block (the input, a price, a
  setting) therefore never makes a block on a branch not taken run.
- A join of alternatives (`after: {any: [a, b]}`, or a plain `after:` list of
  two or more) runs once its required dependencies ran and at least one
  member ran; reading a member that did not run gives None.
- An unhandled failure skips every block downstream of it, joins included,
  and fails the run.  With `on_error: h`, `h` runs (its edge is satisfied by
  the failure) and the failed block's other dependants are not taken.  A
  block that waits (an approval, a long wait) holds back every block
  downstream of it: they stay pending (never "skipped") until the run is
  resumed.
- A block restored from a checkpoint counts as ran, with the routing
  decision it stored; a failure restored from one (a resumed run keeps the
  failures it already had, see service/resuming.py) counts as that failure.

Each settled block walks its outgoing edges once (`Node.out`, see
engine/routing.py for the ranks of the reasons a block does not run).
tests/engine/reference.py states the same rule plainly and
a property test compares the two on thousands of generated graphs.

The queue is drained by a loop, not by recursion, so a chain of thousands of
blocks that finish inline never deepens the stack.

A run's owner may hold a block back (`gate`): a recorded run runs a block
that acts outside the run only once what it read is stored.  The block, once
started, waits in the Task that would have run it, which runs it after.
Which Task runs a block (and the fast path that runs a chain in one Task)
is engine/adoption.py's; how a block ended is an `Outcome` (engine/outcome.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Awaitable, Callable

from flowforge.blocks.base import LATER, Routed, Suspend
from flowforge.engine.adoption import GATED, TaskAdoption
from flowforge.engine.eager import Finished, start_eagerly
from flowforge.engine.failures import failure_detail
from flowforge.engine.guard import message_of as _message
from flowforge.engine.guard import shown_inputs, validate_config
from flowforge.engine.limits import VALUE_SETTING, OutputMeter, ValueLimits
from flowforge.engine.outcome import Outcome, failed, succeeded, waits
from flowforge.engine.result import BlockRecord, add_usage
from flowforge.engine.routing import HELD, NOT_TAKEN, block, mark_edges, miss
from flowforge.engine.scope import (CANCELLED, FAILED, PENDING, SKIPPED, SUCCEEDED, WAITING,
                                    Scope)
from flowforge.errors import ValueTooLarge
from flowforge.storage.checkpoints import pending_reason
from flowforge.workflow.graph import ALTERNATIVE, Node
from flowforge.workflow.templates import RENDERING

__all__ = ["Scheduler", "Scope", "SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED", "WAITING",
           "PENDING"]


class Scheduler(TaskAdoption):
    """Runs graphs for one run: owns the concurrency limit, the ready queue, the
    events; which Task runs a block is TaskAdoption's (engine/adoption.py)."""

    __slots__ = ("bus", "limit", "running", "waiting", "queue", "pumping", "cancelled", "usage",
                 "make_context", "owner", "suspended", "gate", "meter")

    def __init__(self, bus: Any, limit: int, make_context: Any) -> None:
        self.bus = bus
        self.limit = limit
        self.running = 0
        self.waiting: deque[tuple[Scope, str]] | None = None   # made when the limit is hit
        self.queue: deque[tuple[Scope, str]] = deque()
        super().__init__()
        self.pumping = False
        self.cancelled = False
        self.usage: dict[str, dict[str, Any]] = {}
        self.make_context = make_context       # (owner, scope, node) -> BlockContext
        self.owner: Any = None                 # the Run, handed to each block's context
        self.suspended: dict[str, Suspend] = {}    # top-level block id -> why it waits
        # (scope, node) -> None when the block may start now, else an awaitable to
        # wait for first (the service's recorder: what the block read is stored).
        self.gate: Callable[[Scope, Node], Awaitable[None] | None] | None = None
        self.meter = OutputMeter(ValueLimits.of())   # the run's own limits: see Run

    # -- public ---------------------------------------------------------------
    async def run_scope(self, scope: Scope, preset: dict[str, tuple[str, Any]] | None = None,
                        inline: bool = False) -> Scope:
        """Run every block of `scope`; `preset` settles blocks from a checkpoint.

        `inline`: the calling Task runs the first block that needs a Task
        itself (and the chain after it) instead of starting a Task for it and
        waiting: a run's caller does nothing else meanwhile.  Only the run's
        top scope does this; `cancel()` then cancels the caller's Task, and
        the caller must catch that (see `Run.execute`)."""
        if not scope.graph.nodes:
            return scope
        if preset:
            restored = {nid: entry for nid, entry in preset.items()
                        if nid in scope.graph.nodes and entry[0] in (SUCCEEDED, FAILED)}
            for nid in restored:
                scope.pending[nid] = -1        # below zero: never queued again
            for nid, (status, output) in restored.items():
                if status == FAILED:           # an outcome kept: {"error": ...}
                    error = output.get("error") if isinstance(output, dict) else None
                    self._settle(scope, nid, FAILED, None, error or "failed", resumed=True)
                    continue
                if scope.graph.nodes[nid].info.routes and isinstance(output, dict):
                    # A stored routing decision is its `selectedPath` (router and condition).
                    selected = output.get("selectedPath") or {}
                    chosen = selected.get("blockId") if isinstance(selected, dict) else None
                    several = selected.get("blockIds") if isinstance(selected, dict) else None
                    output = Routed(output, tuple(several) if isinstance(several, list)
                                    else (chosen,) if chosen else ())
                self._settle(scope, nid, SUCCEEDED, output, None, resumed=True)
        pending = scope.pending
        for nid in scope.graph.root_ids:
            if pending[nid] == 0:
                self.queue.append((scope, nid))
        if not inline:
            self._pump()
        else:
            adopted = self._pump_adopting()
            if adopted is not None:
                self.inline = asyncio.current_task()
                try:
                    await self._worker(*adopted, started=True)
                finally:
                    self.inline = None
        if scope.remaining:
            scope.done = asyncio.get_running_loop().create_future()
            await scope.done
        return scope

    def cancel(self) -> None:
        self.cancelled = True
        for task in list(self.tasks or ()):
            task.cancel()
        inline = self.inline
        if inline is not None and inline is not _current_task():
            # (A block cancelling its own run from the caller's Task finishes
            # its step; what comes after it is cancelled.)
            self.cancelled_inline = True
            inline.cancel()

    # -- the ready queue ------------------------------------------------------
    def _pump(self) -> None:
        if self.pumping:
            return
        self.pumping = True
        try:
            queue = self.queue
            while queue:
                scope, nid = queue.popleft()
                self._dispatch(scope, nid)
        finally:
            self.pumping = False

    def _dispatch(self, scope: Scope, nid: str) -> None:
        node = scope.graph.nodes[nid]
        if self.cancelled:
            self._settle(scope, nid, CANCELLED, None, "the run was cancelled")
            return
        blocked = scope.blocked
        if blocked is not None and nid in blocked:
            rank, reason = blocked[nid]
            if rank == HELD:
                self._settle(scope, nid, PENDING, None, None, reason=reason)
            else:
                self._settle(scope, nid, SKIPPED, None, None, reason=reason)
            return
        if node.joins and not scope.active[nid]:
            reason = scope.missed[nid] if scope.missed else "no member of its join ran"
            block(scope, nid, NOT_TAKEN, reason)
            self._settle(scope, nid, SKIPPED, None, None, reason=reason)
            return
        if node.info.holds_slot:
            if self.running >= self.limit:
                if self.waiting is None:
                    self.waiting = deque()
                self.waiting.append((scope, nid))
                return
            self.running += 1
        self._launch(scope, node)

    def _launch(self, scope: Scope, node: Node) -> None:
        # Asked before `block_started`, awaited after it: the wait's one write
        # then stores the predecessor's outcome and this start together.
        waiting = self.gate(scope, node) if self.gate is not None else None
        nid = node.id
        now = time.time()
        scope.records[nid] = BlockRecord("running", now, type=node.type)
        if self.bus.limit is not None and self.bus.over_limit():     # a server's cap
            self._finish(scope, node, failed(self.bus.over_limit()))
            return
        if node.resolve is None:
            config, inputs = node.config, node.spec.with_
        else:
            RENDERING.start(self.meter.limits.value, VALUE_SETTING)
            try:
                inputs = node.resolve(scope.values)
                config = validate_config(node, inputs)
            except Exception as exc:  # noqa: BLE001 - reported as the block's failure
                if isinstance(exc, ValueTooLarge):
                    exc = exc.located("with")
                self.bus.publish("block_started", nid, block_type=node.type, scope=scope.label)
                self._finish(scope, node, failed(_message(exc), exc))
                return
            finally:
                RENDERING.left = None
        self.bus.publish_block("block_started", nid, scope.label, "block_type", node.type,
                               "inputs", shown_inputs(inputs), now)
        context = self.make_context(self.owner, scope, node)
        if waiting is not None:                # it runs after the wait, in this Task or its own
            self._in_task(scope, node, GATED, (waiting, context, config))
            return
        self._start(scope, node, context, config)

    def _start(self, scope: Scope, node: Node, context: Any, config: Any) -> None:
        try:
            plain = node.timeout is None and node.retry is None
            # A block that never waits answers at once: no coroutine at all.
            output = node.info.run_now(context, config) if plain else LATER
            if output is LATER:
                if not (plain and node.info.is_eager(config)):
                    self._in_task(scope, node, context, config)
                    return
                started = start_eagerly(node.info.run(context, config))
                if type(started) is Finished:
                    output = started.value
        except Suspend as suspend:
            self._suspend(scope, node, suspend)
            return
        except Exception as exc:  # noqa: BLE001
            self._finish(scope, node, failed(_message(exc), exc))
            return
        if output is not LATER:
            self._finish(scope, node, succeeded(output))
            return
        self._hold(started, None)
        started.add_done_callback(lambda task: self._eager_done(scope, node, task))

    def _suspend(self, scope: Scope, node: Node, suspend: Suspend) -> None:
        """Settle a block that waits outside the process: only the run's top
        scope can stop and be resumed later."""
        if scope.label is not None:
            self._finish(scope, node, failed(
                f"a `{node.type}` block can pause the run only at the top level of the "
                f"workflow, not inside a loop, parallel or nested workflow ({scope.label}): "
                f"move it out"))
            return
        self.suspended[node.id] = suspend
        self._finish(scope, node, waits(suspend.state, suspend.reason))

    def _finish(self, scope: Scope, node: Node, outcome: Outcome) -> None:
        status, output, error, exc = outcome.status, outcome.output, outcome.error, outcome.exc
        if status == SUCCEEDED and (too_large := self.meter.over(
                output.output if type(output) is Routed else output)) is not None:
            status, output, error, exc = FAILED, None, too_large.message, too_large
        if node.info.holds_slot:
            self.running -= 1
            if self.waiting:
                waiting_scope, waiting_id = self.waiting.popleft()
                self.queue.append((waiting_scope, waiting_id))
                # re-take the slot when dispatched
        self._settle(scope, node.id, status, output, error, exc=exc)

    # -- settling and edges ---------------------------------------------------
    def _settle(self, scope: Scope, nid: str, status: str, output: Any, error: str | None,
                exc: BaseException | None = None, reason: str | None = None,
                resumed: bool = False) -> None:
        node = scope.graph.nodes[nid]
        targets = None
        if type(output) is Routed:
            targets = output.targets
            output = output.output
        now = time.time()
        record = scope.records.get(nid)
        if record is None:
            record = scope.records[nid] = BlockRecord(status, None, now, type=node.type)
        record.status = status
        record.finished_at = now
        record.error = error
        record.reason = reason
        bus = self.bus
        if status == SUCCEEDED:
            scope.outputs[nid] = output
            scope.values[nid] = output
            if node.alias is not None:
                scope.values.setdefault(node.alias, output)
            if type(output) is dict and ("tokens" in output or "cost" in output):
                add_usage(self.usage, nid, output)
            if resumed:
                bus.publish("block_succeeded", nid, output=output, resumed=True,
                            scope=scope.label)
            else:
                started_at = record.started_at
                bus.publish_block("block_succeeded", nid, scope.label, "output", output,
                                  "duration_ms", None if started_at is None
                                  else round((now - started_at) * 1000, 3), now)
        elif status == FAILED:
            failure = {"error": error}
            scope.outputs[nid] = failure
            scope.values[nid] = failure
            if node.spec.on_error is None:
                scope.errors[nid] = error or "failed"
            detail = {"resumed": True} if resumed else failure_detail(
                exc, self.owner is None or self.owner.policy.trusted,
                f"run {bus.run_id}, block {nid}")
            bus.publish("block_failed", nid, error=error, scope=scope.label,
                        handled_by=node.spec.on_error, **detail)
        elif status == SKIPPED:
            bus.publish("block_skipped", nid, reason=reason, scope=scope.label,
                        block_type=node.type)
        elif status == PENDING:         # no event: the run's `run_waiting` lists them
            record.waiting_for = reason
            record.reason = pending_reason(reason)
            record.finished_at = None
        elif status == WAITING:
            suspend = self.suspended[nid]
            bus.publish("block_waiting", nid, output=output, reason=error, scope=scope.label,
                        block_type=node.type, resume_at=suspend.resume_at)
        else:
            bus.publish("block_cancelled", nid, reason=error, scope=scope.label,
                        block_type=node.type)

        out = node.out
        if out:
            pending, queue = scope.pending, self.queue
            if status == SUCCEEDED and targets is None:
                for dep_id, mode in out:           # the common case: every edge ran
                    if mode:
                        if mode == ALTERNATIVE:
                            scope.active[dep_id] += 1
                        else:
                            miss(scope, dep_id, mode, NOT_TAKEN,
                                 f"not needed: '{nid}' did not fail")
                    left = pending[dep_id] - 1
                    pending[dep_id] = left
                    if left == 0:
                        queue.append((scope, dep_id))
            else:
                mark_edges(scope, node, status, targets, self.queue)
        scope.remaining -= 1
        if scope.remaining == 0 and scope.done is not None and not scope.done.done():
            scope.done.set_result(None)


def _current_task() -> asyncio.Task | None:
    try:
        return asyncio.current_task()
    except RuntimeError:           # called outside the event loop
        return None
