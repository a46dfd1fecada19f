"""Run and cancel workflows with storage wired in (resuming: `service.resuming`).

This is the one place that joins the engine and storage: it creates the run
row, loads per-user memory, attaches a `Recorder` to the event bus, and
writes the outcome — so the CLI, the Python API and the server all produce
the same complete record.  `storage=False` runs without a database (fast,
nothing kept); `None` uses the default database (FLOWFORGE_DATABASE_URL or
the user's data directory).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from flowforge.engine.budget import BudgetLimit
from flowforge.engine.events import EventBus
from flowforge.engine.failures import unexpected_detail
from flowforge.engine.result import RunResult
from flowforge.engine.runner import Run
from flowforge.errors import FlowforgeError, NotFound
from flowforge.model_strings import qualified
from flowforge.service.cancel import (LEASE_SECONDS, end_or_cancel_abandoned, forget_run,
                                      process_id, request_cancel, watch_for_cancel)
from flowforge.service.loading import load
from flowforge.service.new_run import (guarded_resolver, hidden_values, hide_secrets,
                                      idempotency_columns, new_run)
from flowforge.service.recorder import Recorder, StoreUnreachable, redactor
from flowforge.service.secrets import load_secrets
from flowforge.storage import Storage, storage_from_url
from flowforge.storage.base import TERMINAL_STATUSES
from flowforge.workflow.policy import TRUSTED, Policy, check_policy

__all__ = ["run", "run_sync", "start_run", "cancel_run", "RunHandle", "open_storage",
           "guarded_resolver", "RunStateError", "StorageArg", "idempotency_columns",
           "stored_run"]


class RunStateError(FlowforgeError):
    """The run is not in a state that allows this: it already ended, or another
    live process is running it."""

StorageArg = Storage | str | bool | None


@asynccontextmanager
async def open_storage(storage: StorageArg) -> AsyncIterator[Storage | None]:
    """Yield an open Storage for the argument forms `run()` accepts; close
    it afterwards only if it was opened here."""
    if storage is False:
        yield None
        return
    if isinstance(storage, Storage):
        await storage.open()
        yield storage
        return
    opened = storage_from_url(storage if isinstance(storage, str) else None)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


@dataclass
class RunHandle:
    """A started run: `await handle.wait()` for the result, `handle.cancel()` to stop it."""

    run: Run
    task: asyncio.Task
    recorder: Recorder | None

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def bus(self) -> EventBus:
        return self.run.bus

    def cancel(self) -> None:
        self.run.cancel()

    async def wait(self) -> RunResult:
        return await asyncio.shield(self.task)


async def start_run(workflow: Any, inputs: dict[str, Any] | None = None,
                    **options: Any) -> RunHandle:
    """Start a run in the background; `await handle.wait()` for its result.

    `storage` means what it means for `run()`: None the default database, a
    URL that database, a Storage that one (opened if needed, left open),
    False no record.  Other options are those of `run()` (user, model,
    concurrency, services, on_event, policy, secrets, run_secrets, budget) plus
    provider_keys, stored_workflows, run_id, workflow_version, checkpoint, start_seq,
    budget_limits (a server's per-user limits, `BudgetLimit`s), idempotency (a
    submission's key and request fingerprint: `IdempotencyKeyTaken` when the
    user already has a run with that key) and webhook (stored in the run's row,
    for the server that delivers it)."""
    storage = options.pop("storage", None)
    owned: Storage | None = None
    if storage is False:
        storage = None
    elif isinstance(storage, Storage):
        await storage.open()
    else:
        storage = owned = storage_from_url(storage)
        await owned.open()
    try:
        run_obj, recorder = await _prepare(workflow, inputs, storage=storage, **options)
    except BaseException:
        if owned is not None:
            await owned.close()
        raise
    task = asyncio.get_running_loop().create_task(
        _execute(run_obj, recorder, storage) if owned is None
        else _execute_and_close(run_obj, recorder, owned))
    return RunHandle(run_obj, task, recorder)


async def _execute_and_close(run_obj: Run, recorder: Recorder | None, storage: Storage
                             ) -> RunResult:
    try:
        return await _execute(run_obj, recorder, storage)
    finally:
        await storage.close()


async def _prepare(workflow: Any, inputs: dict[str, Any] | None = None, *,
                    user: str | dict[str, Any] | None = None, storage: Storage | None = None,
                    model: str | None = None, concurrency: int | None = None,
                    services: dict[str, Any] | None = None, run_id: str | None = None,
                    on_event: Callable[[dict], None] | None = None,
                    workflow_version: int | None = None,
                    checkpoint: dict[str, tuple[str, Any]] | None = None,
                    child_checkpoints: dict[str, dict[str, tuple[str, Any]]] | None = None,
                    start_seq: int = 0, policy: Policy = TRUSTED,
                    secrets: dict[str, str] | None = None,
                    run_secrets: dict[str, str] | None = None,
                    provider_keys: dict[str, str] | None = None,
                    stored_workflows: Callable[[str], Any] | None = None,
                    traceparent: str | None = None, budget: Any = None,
                    budget_limits: list[BudgetLimit] | None = None,
                    idempotency: tuple[str, str] | None = None,
                    webhook: str | None = None, started_at: float | None = None
                    ) -> tuple[Run, Recorder | None]:
    """Create the run (row, memory, recorder); `_execute` runs it and writes the outcome.

    `policy` is checked against the document before anything is stored
    (CapabilityDenied); `secrets` default to the user's stored ones.
    `idempotency` (key, request fingerprint) is stored in the run's row: when
    the user already has a run with that key, IdempotencyKeyTaken is raised
    and nothing is stored or started.  `webhook` (a server's) goes in the same
    row: a retried submission finds the run with it, whenever the first died.
    `started_at`: a stored run starting now (a queued one), written with its
    `running` status rather than in a write of its own."""
    compiled = load(workflow)
    model = qualified(model) or model       # `--model gpt-4o`: read as openai/gpt-4o
    check_policy(compiled, policy, model_override=model)
    if storage is not None:
        services = dict(services or {})
        services.setdefault("storage", storage)
    user_key = user.get("id") if isinstance(user, dict) else user
    if secrets is None and storage is not None:
        secrets = await load_secrets(storage, user_key or "default")
    if run_secrets:
        secrets = {**(secrets or {}), **run_secrets}
    run_obj = new_run(compiled, inputs, user=user, run_id=run_id, model=model,
                       concurrency=concurrency, services=services, on_event=None,
                       checkpoint=checkpoint, child_checkpoints=child_checkpoints,
                       start_seq=start_seq, policy=policy,
                       secrets=secrets, provider_keys=provider_keys,
                       stored_workflows=stored_workflows, traceparent=traceparent,
                       budget=budget, budget_limits=budget_limits)
    bus = run_obj.bus
    user_id = run_obj.user.get("id")
    recorder = None
    if storage is not None:
        if compiled.doc.memory:
            run_obj.memory = await storage.get_memory(user_id, list(compiled.doc.memory))
        if checkpoint is None:
            await storage.create_run({
                "run_id": run_obj.run_id, "workflow_id": compiled.id,
                "workflow_version": workflow_version, "user_id": user_id, "status": "running",
                "inputs": inputs or {}, "created_at": time.time(), "started_at": time.time(),
                "document": compiled.document, "lease_owner": process_id(),
                "lease_expires_at": time.time() + LEASE_SECONDS,
                # A request's budget outlives the process: resuming applies it again.
                "budget": budget if budget is None or isinstance(budget, dict)
                else budget.model_dump(), **idempotency_columns(idempotency),
                **({"webhook": webhook} if webhook else {})})
        else:
            # Resuming is asked for explicitly: it supersedes an earlier cancel request.
            await storage.update_run(run_obj.run_id, status="running", finished_at=None,
                                     error=None, cancel_requested_at=None,
                                     **({"started_at": started_at} if started_at else {}))
        # every write is fenced by the lease this process took (created or claimed)
        recorder = Recorder(storage, run_obj.run_id, redactor(hidden_values(run_obj)),
                            lease=(process_id(), LEASE_SECONDS))
        bus.subscribe(recorder)
        # a block that acts outside the run starts once what it read is stored
        run_obj.scheduler.gate = recorder.gate(bus)
    if on_event is not None:
        bus.observe(on_event)
    return run_obj, recorder


async def _execute(run_obj: Run, recorder: Recorder | None, storage: Storage | None
                   ) -> RunResult:
    """Execute a prepared run; with storage, write its outcome and memory."""
    if storage is None:
        return hide_secrets(run_obj, await run_obj.execute())
    lost: list[bool] = []

    def lose() -> None:
        # another process took the lease (this one was stalled past it) and runs
        # the run now: stop, and store nothing more - the record is the other's
        lost.append(True)
        if recorder is not None:
            recorder.drop()
        run_obj.cancel()

    # a cancel request from any process reaches it
    watch_for_cancel(storage, run_obj, on_lost=lose)
    if recorder is not None:
        recorder.on_cut_off = lambda _unreachable: run_obj.cancel()
        recorder.on_lost = lose         # a fenced write found the lease taken
    try:
        result = await run_obj.execute()
    except Exception as exc:  # noqa: BLE001 - a bug, not a block's failure: recorded, not lost
        result = await _record_unexpected(run_obj, storage, exc)
    except BaseException:
        forget_run(storage, run_obj.run_id)
        if recorder is not None:
            await recorder.close()
        raise
    finally:
        # run -> scheduler -> gate -> recorder -> on_cut_off -> run: break the cycle,
        # so a finished run is freed at once, not by a later garbage collection
        run_obj.scheduler.gate = None
        if recorder is not None:
            recorder.on_cut_off = recorder.on_lost = None
    forget_run(storage, run_obj.run_id)
    if recorder is not None and recorder.cut_off is not None:
        return _cut_off(run_obj, result, recorder, recorder.cut_off)
    if lost:
        if recorder is not None:
            await recorder.close()
        raise _taken_over(run_obj)
    result = hide_secrets(run_obj, result)
    redact = recorder.redact if recorder is not None else (lambda data: data)
    traced = {"trace_id": run_obj.tracer.trace_id} if run_obj.tracer is not None else {}
    outcome = dict(
        status=result.status, outputs=redact(result.outputs),
        usage=result.usage, memory=redact(result.memory), error=redact(result.error),
        finished_at=time.time(), lease_owner=None, lease_expires_at=None,
        resume_at=run_obj.resume_at if result.status == "waiting" else None, **traced)
    if recorder is not None:
        try:
            await recorder.close(outcome)  # the last events and the run's row, stored together
        except StoreUnreachable as unreachable:
            return _cut_off(run_obj, result, recorder, unreachable)
        if recorder.lost is not None:      # the outcome's write was fenced off: not ours
            raise _taken_over(run_obj)
    else:
        await storage.update_run(run_obj.run_id, **outcome)
    memory_keys = run_obj.doc.memory
    if result.status == "succeeded" and memory_keys:
        await storage.save_memory(run_obj.user.get("id"), {
            k: v for k, v in result.memory.items() if k in memory_keys})
    return result


def _taken_over(run_obj: Run) -> RunStateError:
    return RunStateError(f"run {run_obj.run_id}: another process took its lease (this "
                         f"one was stalled past it) and runs it now; stopped here")


def _cut_off(run_obj: Run, result: RunResult, recorder: Recorder,
             unreachable: StoreUnreachable) -> RunResult:
    """The run whose store stayed away: it stopped where its record stops, and
    it ends `failed` here with the one-line reason and how to resume it; its
    row stays `running`, so a resume (or another worker) finishes it."""
    recorder.drop()
    result = hide_secrets(run_obj, result)
    result.status, result.error = "failed", str(unreachable)
    events = result.events
    if events and events[-1].get("type") == "run_finished":
        events[-1] = {**events[-1], "status": "failed", "error": result.error}
    return result


async def _record_unexpected(run_obj: Run, storage: Storage, exc: Exception) -> RunResult:
    """An exception the engine did not expect: the run ends `failed` with the
    message, and the traceback goes to the record (a `run_error` event), not
    to the user's screen; on a server, to the server's log under the error id
    the event carries (`engine.failures`)."""
    message = f"unexpected error: {type(exc).__name__}: {exc}"
    run_obj.bus.publish("run_error", error=message, **unexpected_detail(
        exc, run_obj.policy.trusted, f"run {run_obj.run_id}"))
    run_obj.bus.publish("run_finished", status="failed", error=message)
    return RunResult(run_obj.run_id, run_obj.doc.id, "failed", {}, {}, {},
                     {"tokens": {"prompt": 0, "completion": 0, "total": 0}, "cost": 0.0,
                      "blocks": {}}, {}, events=run_obj.bus.events, error=message)


async def run(workflow: Any, inputs: dict[str, Any] | None = None, *,
              user: str | dict[str, Any] | None = None, storage: StorageArg = None,
              model: str | None = None, concurrency: int | None = None,
              services: dict[str, Any] | None = None,
              on_event: Callable[[dict], None] | None = None, policy: Policy = TRUSTED,
              secrets: dict[str, str] | None = None,
              run_secrets: dict[str, str] | None = None, budget: Any = None) -> RunResult:
    """Run a workflow (path, dict, Workflow or CompiledWorkflow) to the end.

    Workflow errors raise before anything runs; a failing block does not
    raise — the result says `failed` and names the block.  `policy` limits
    what the document may reach of the host (default: trusted, as on one's
    own machine); `secrets` default to the user's stored secrets, and
    `run_secrets` (a prompt-chain's API key arriving with the run) are added
    over them for this run only: hidden like them, never stored; `budget`
    (`{tokens, cost, on_exceed}`) replaces the document's `budget:`.
    `on_event(event)` observes every event as it happens; an exception it
    raises is logged once and never changes how the run ends
    (`engine.events.Observer`)."""
    compiled = load(workflow)
    model = qualified(model) or model       # `--model gpt-4o`: read as openai/gpt-4o
    if storage is False:       # the in-memory fast path: no database to open or close
        check_policy(compiled, policy, model_override=model)
        if run_secrets:
            secrets = {**(secrets or {}), **run_secrets}
        run_obj = new_run(compiled, inputs, user=user, run_id=None, model=model,
                           concurrency=concurrency, services=services,
                           on_event=on_event, policy=policy, secrets=secrets,
                           budget=budget)
        return hide_secrets(run_obj, await run_obj.execute())
    async with open_storage(storage) as opened:
        run_obj, recorder = await _prepare(compiled, inputs, user=user, storage=opened,
                                           model=model, concurrency=concurrency,
                                           services=services, on_event=on_event,
                                           policy=policy, secrets=secrets,
                                           run_secrets=run_secrets, budget=budget)
        return await _execute(run_obj, recorder, opened)


def run_sync(workflow: Any, inputs: dict[str, Any] | None = None, **kwargs: Any) -> RunResult:
    """`run()` for scripts without an event loop.  Inside a running loop (a
    notebook, an async app) it cannot block: use `await flowforge.run(...)`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run(workflow, inputs, **kwargs))
    raise RuntimeError("flowforge.run_sync() was called inside a running event loop (a "
                       "notebook, an async function): use `await flowforge.run(workflow, "
                       "inputs, ...)` there instead")


async def cancel_run(run_id: str, *, storage: StorageArg = None, wait: float = 10.0) -> str:
    """Cancel a run wherever it runs (this process, another one, any server
    process on the same database) and wait up to `wait` seconds for it to end.

    Returns the run's status: `cancelled`, or how it had already ended, or
    `cancelling` when it still runs after `wait` (if no process runs it any
    more, it was cut off: `resume` finishes it)."""
    async with open_storage(storage) as opened:
        row = await stored_run(opened, run_id, "cancelling")
        if row["status"] in TERMINAL_STATUSES:
            return row["status"]
        await request_cancel(opened, run_id)
        # No process runs it (the server or worker is down, or died): cancel it in
        # the store, now or once its lease lapses while we wait.
        if not await end_or_cancel_abandoned(opened, run_id, wait):
            return "cancelling"
        row = await opened.get_run(run_id)
        return row["status"] if row is not None else "cancelled"


async def stored_run(storage: Storage | None, run_id: str, doing: str) -> dict[str, Any]:
    """The stored row of `run_id` (cancelling and resuming both start here);
    `NotFound` says what `doing` needed when there is no storage or no such run."""
    if storage is None:
        raise NotFound(f"{doing} a run needs storage")
    row = await storage.get_run(run_id)
    if row is None:
        raise NotFound(f"no run with id '{run_id}' in {storage.url}")
    return row
