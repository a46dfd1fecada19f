"""The Tasks that run blocks, and the fast path that saves most of them.

The scheduler decides *whether* and *when* a block runs (engine/scheduler.py,
the routing rule); this module decides *which Task* runs it.  A block that
must await something needs a Task.  Starting one per block costs a Task and
two loop turns, so a Task that has just settled its block pumps the ready
queue itself and *adopts* the first ready block that needs a Task, running
it next in the same Task: a chain of a thousand agent calls runs in one Task.

A block held back by the run's gate (what it read is not stored yet) is
adopted the same way, with `_GATED` in place of its context: the Task first
waits for the gate, then starts the block.

`TaskAdoption` is the scheduler's base: it owns the Task bookkeeping (`tasks`,
`inline`, `adopting`, `adopted`) and calls back into the scheduler's
`_start`, `_finish`, `_suspend` and `_pump`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flowforge.blocks.base import Suspend
from flowforge.engine.guard import message_of as _message
from flowforge.engine.guard import run_guarded
from flowforge.engine.outcome import Outcome, cancelled, failed, succeeded
from flowforge.engine.scope import Scope
from flowforge.workflow.graph import Node

__all__ = ["TaskAdoption", "GATED"]

#: In place of a block's context: the block waits for the gate's awaitable (see _worker).
GATED: Any = object()
#: A block the calling Task keeps to run next: its scope, node, context and config.
Adopted = tuple[Scope, Node, Any, Any]


class TaskAdoption:
    """The Tasks running a run's blocks, and which of them runs what next."""

    __slots__ = ("tasks", "inline", "cancelled_inline", "adopting", "adopted")

    # Provided by the scheduler (see engine/scheduler.py).
    cancelled: bool
    bus: Any

    def __init__(self) -> None:
        # Every Task running blocks -> the block it holds until its first step
        # (None once it runs: from then on the Task settles its blocks itself).
        # Made with the first such Task: a chain run inline never needs one.
        self.tasks: dict[asyncio.Task, tuple[Scope, Node] | None] | None = None
        self.inline: asyncio.Task | None = None   # the caller's Task while it runs blocks
        self.cancelled_inline = False          # cancel() cancelled the caller's Task
        self.adopting = False                  # a Task is pumping and will run the next block
        self.adopted: Adopted | None = None    # ...this one (see _worker)

    # -- supplied by the scheduler --------------------------------------------
    def _start(self, scope: Scope, node: Node, context: Any, config: Any) -> None:
        raise NotImplementedError

    def _finish(self, scope: Scope, node: Node, outcome: Outcome) -> None:
        raise NotImplementedError

    def _suspend(self, scope: Scope, node: Node, suspend: Suspend) -> None:
        raise NotImplementedError

    def _pump(self) -> None:
        raise NotImplementedError

    # -- running a block in a Task --------------------------------------------
    def _in_task(self, scope: Scope, node: Node, context: Any, config: Any) -> None:
        """Run the block in the Task that is pumping, if one is, else in a new one."""
        if self.adopting and self.adopted is None:
            self.adopted = (scope, node, context, config)
            return
        task = asyncio.get_running_loop().create_task(self._worker(scope, node, context, config))
        self._hold(task, (scope, node))
        task.add_done_callback(self._worker_done)

    def _pump_adopting(self) -> Adopted | None:
        """Pump, keeping the first block that needs a Task for the calling one
        instead of starting a Task."""
        self.adopting, self.adopted = True, None
        try:
            self._pump()
        finally:
            self.adopting = False
        adopted, self.adopted = self.adopted, None
        return adopted

    async def _worker(self, scope: Scope, node: Node, context: Any, config: Any,
                      started: bool = False) -> None:
        """Run a block in a Task, settle it from inside the Task, and carry on
        with one of the blocks that became ready (a chain runs in one Task
        instead of a Task and two extra loop turns per block)."""
        if not started:
            self._hold(asyncio.current_task(), None)   # running: it settles its blocks itself
        while True:
            if context is GATED:
                adopted = await self._after_gate(scope, node, config)
                if adopted is None:
                    return
                scope, node, context, config = adopted
                continue
            try:
                if node.timeout is None and node.retry is None:
                    output = await node.info.run(context, config)
                else:
                    output = await run_guarded(node, context, config, self.bus)
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if not self.cancelled and task is not None and not task.cancelling():
                    # Nobody cancelled this Task: the block let out a CancelledError
                    # of its own (an inner future was cancelled) - its failure.
                    self._finish(scope, node, failed(
                        "CancelledError: the block was cancelled from inside (not by "
                        "cancelling the run)", exc))
                else:
                    # The run is being cancelled (this may be the caller's Task,
                    # running the scope inline): what is queued next is
                    # cancelled, not started.
                    self.cancelled = True
                    self._finish(scope, node, cancelled("cancelled while running"))
                    self._pump()
                    raise
            except Suspend as suspend:
                self._suspend(scope, node, suspend)
            except Exception as exc:  # noqa: BLE001 - reported as the block's failure
                self._finish(scope, node, failed(_message(exc), exc))
            else:
                self._finish(scope, node, succeeded(output))
            adopted = self._pump_adopting()
            if adopted is None:
                return
            scope, node, context, config = adopted

    async def _after_gate(self, scope: Scope, node: Node, gated: tuple[Any, Any, Any]
                          ) -> Adopted | None:
        """Wait for the gate, then start the block, keeping it for this Task if
        it needs one (else the next ready block that does)."""
        waiting, context, config = gated
        try:
            await waiting
        except asyncio.CancelledError:
            self.cancelled = True
            self._finish(scope, node, cancelled("cancelled while running"))
            self._pump()
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. the run's store is gone: not run
            self._finish(scope, node, failed(f"not run: {_message(exc)}"))
            return self._pump_adopting()
        self.adopting, self.adopted = True, None
        try:
            self._start(scope, node, context, config)
        finally:
            self.adopting = False
        adopted, self.adopted = self.adopted, None
        return adopted if adopted is not None else self._pump_adopting()

    # -- the Tasks' bookkeeping -----------------------------------------------
    def _hold(self, task: asyncio.Task, held: tuple[Scope, Node] | None) -> None:
        if self.tasks is None:
            self.tasks = {}
        self.tasks[task] = held

    def _worker_done(self, task: asyncio.Task) -> None:
        """A worker Task cancelled before its first step never ran its body:
        settle the block it was holding so the run still ends."""
        held = self.tasks.pop(task, None) if self.tasks else None
        if held is not None:
            scope, node = held
            self._finish(scope, node, cancelled("cancelled before it started"))
            self._pump()

    def _eager_done(self, scope: Scope, node: Node, task: asyncio.Task) -> None:
        """A block started eagerly (its first step ran inline) finished in its Task."""
        if self.tasks:
            self.tasks.pop(task, None)
        if task.cancelled():
            self._finish(scope, node, cancelled("cancelled while running"))
        else:
            exc = task.exception()
            if exc is None:
                self._finish(scope, node, succeeded(task.result()))
            elif isinstance(exc, asyncio.CancelledError):
                self._finish(scope, node, cancelled("cancelled while running"))
            elif isinstance(exc, Suspend):
                self._suspend(scope, node, exc)
            else:
                self._finish(scope, node, failed(_message(exc), exc))
        self._pump()
