"""The runs this server process is executing: start, cancel, drain on shutdown.

A run is started through the service (`start_run`), which records every event
and checkpoint; this registry only keeps the handles so a cancel request can
reach the running task, and sends the run's webhook when it ends.  Streams do
not come from here: SSE and WebSocket read the stored events.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

import httpx

from flowforge.engine.budget import BudgetLimit
from flowforge.engine.ids import new_run_id
from flowforge.engine.inputs import validate_inputs
from flowforge.engine.result import RunResult
from flowforge.server.settings import ServerSettings
from flowforge.server.errors import ApiError
from flowforge.server.run_slots import RunSlots
from flowforge.server.webhooks import deliver_webhook, webhook_payload, webhook_refusal
from flowforge.service.pool import deliver_owed
from flowforge.service.webhooks import delivery_options
from flowforge.service.approvals import check_decision, start_decision
from flowforge.service.grants import policy_for
from flowforge.service.resuming import start_resume
from flowforge.service.runs import RunHandle, RunStateError, start_run
from flowforge.service.secrets import load_secrets
from flowforge.service.workflows import WorkflowStore
from flowforge.tls import verified_context
from flowforge.workflow.policy import Policy
from flowforge.storage.base import Storage
from flowforge.workflow.graph import CompiledWorkflow

__all__ = ["LiveRuns", "PayloadBuilder"]

#: (result, run row) -> the webhook's JSON body
PayloadBuilder = Callable[[RunResult, "dict[str, Any] | None"], Awaitable[dict[str, Any]]]

log = logging.getLogger("flowforge.server")


class LiveRuns:
    def __init__(self, storage: Storage, settings: ServerSettings,
                 http: httpx.AsyncClient | None = None) -> None:
        self.storage = storage
        self.settings = settings
        self.http = http or httpx.AsyncClient(timeout=settings.webhook_timeout,
                                               verify=verified_context())
        self.workflows = WorkflowStore(storage, max_blocks=settings.max_document_blocks)
        self.handles: dict[str, RunHandle] = {}
        self.background: set[asyncio.Task] = set()
        self.slots = RunSlots(settings.max_user_runs)

    async def launch(self, user: dict[str, Any], owner: str, workflow_id: str,
                     version: int | None, inputs: dict[str, Any], *,
                     webhook: str | None = None, budget: Any = None,
                     idempotency: tuple[str, str] | None = None
                     ) -> tuple[RunHandle, int]:
        """Start a stored workflow (latest or pinned version) for `user`: inputs
        are checked first, so a bad request is refused (InputError) instead of
        becoming a failed run.  Returns the handle and the version that runs.
        `idempotency`: see `start`."""
        self.slots.check(user)                      # 429 before loading anything
        row, compiled = await self.workflows.compiled(owner, workflow_id, version)
        validate_inputs(compiled.doc.inputs, inputs)
        handle = await self.start(compiled, inputs, user=user, version=row["version"],
                                  webhook=webhook, budget=budget, idempotency=idempotency)
        return handle, row["version"]

    async def start(self, compiled: CompiledWorkflow, inputs: dict[str, Any], *,
                    user: dict[str, Any], version: int | None = None,
                    webhook: str | None = None,
                    services: dict[str, Any] | None = None,
                    run_secrets: dict[str, str] | None = None, run_id: str | None = None,
                    payload: PayloadBuilder | None = None, budget: Any = None,
                    idempotency: tuple[str, str] | None = None) -> RunHandle:
        """Start a compiled workflow as `user` (a user row) in the background.
        A webhook the server will not call is refused here (422), before the run.
        `run_secrets` (a prompt chain's API key) are hidden like the user's
        secrets and never stored; `payload(result, row)` builds the webhook's
        body instead of the run result (a prompt-chain task's shape).
        `idempotency` (an `Idempotency-Key`, the request's fingerprint) goes
        into the run's row, in process or on the pool: IdempotencyKeyTaken
        when the user already has a run with that key (nothing started)."""
        webhook = webhook or compiled.doc.webhook
        if webhook:
            await self.check_webhook(webhook)
        if budget is not None:            # a request's budget: its model passes the gate
            on_exceed = budget.get("on_exceed") if isinstance(budget, dict) else \
                getattr(budget, "on_exceed", None)
            downgrade = on_exceed.get("downgrade") if isinstance(on_exceed, dict) else \
                getattr(on_exceed, "downgrade", None)
            (await self.policy(user)).check_model(downgrade, "budget.on_exceed.downgrade")
        run_id = run_id or new_run_id()
        owner = self.slots.claim(user)              # 429 when the user is at the cap
        try:
            handle = await self._start(compiled, inputs, user, version, webhook, services,
                                       run_secrets, run_id, payload, budget, idempotency)
        except BaseException:
            self.slots.free(owner)
            raise
        self.slots.bind(run_id, owner)
        return handle

    async def _start(self, compiled: CompiledWorkflow, inputs: dict[str, Any],
                     user: dict[str, Any], version: int | None, webhook: str | None,
                     services: dict[str, Any] | None, run_secrets: dict[str, str] | None,
                     run_id: str, payload: PayloadBuilder | None, budget: Any,
                     idempotency: tuple[str, str] | None) -> RunHandle:
        if self.settings.workers == "celery":
            if run_secrets or services and set(services) - {"files_root",
                                                             "sandbox_isolated_only"}:
                raise ApiError(501, "this kind of run needs the server's own process (it "
                                    "carries live objects a worker cannot receive); start "
                                    "the server without --workers celery to run it")
            from flowforge.service.pool import start_queued
            user_ref = {"id": user["user_id"], "name": user["name"], "role": user["role"]}
            queued = await start_queued(compiled, inputs, storage=self.storage,
                                        user=user_ref, model=self.settings.model,
                                        policy=await self.policy(user),
                                        files_root=self.settings.files_root,
                                        run_id=run_id, workflow_version=version,
                                        share_provider_keys=self.settings.share_provider_keys,
                                        budget=budget,
                                        resume_cut_off=self.settings.resume_cut_off,
                                        webhook=webhook,
                                        webhook_delivery=self.delivery_options(),
                                        idempotency=idempotency,
                                        limits=self.settings.run_limits())
            self.handles[run_id] = queued              # type: ignore[assignment]
            queued.task.add_done_callback(
                lambda task: self._finished(queued, task, webhook,  # type: ignore[arg-type]
                                            user["webhook_secret"], payload))
            return queued                              # type: ignore[return-value]
        handle = await start_run(compiled, inputs, run_id=run_id, workflow_version=version,
                                 budget=budget, run_secrets=run_secrets,
                                 idempotency=idempotency, webhook=webhook,
                                 **await self.run_options(user, services))
        self.handles[run_id] = handle
        handle.task.add_done_callback(
            lambda task: self._finished(handle, task, webhook, user["webhook_secret"], payload))
        return handle

    async def decide(self, run_id: str, block_id: str, decision: str, *, by: dict[str, Any],
                     comment: str | None) -> RunHandle:
        """Approve or reject a waiting run's approval block and resume the run
        here in the background, with its owner's policy, secrets and limits
        (not the decider's: an admin deciding lends the run no rights)."""
        row = await check_decision(self.storage, run_id, block_id, decision)
        owner = await self.storage.get_user(row["user_id"]) if row.get("user_id") else None
        if owner is None:
            raise ApiError(409, f"run '{run_id}' belongs to no known user: it cannot be "
                                f"resumed on this server")
        if await self._on_pool(run_id):
            from flowforge.service.pool import QueuedHandle, QueueError, decide_on_pool
            events = await self.storage.get_events(run_id)
            try:
                await decide_on_pool(run_id, block_id, decision, by=by["name"],
                                     comment=comment, storage=self.storage)
            except QueueError as exc:                   # the broker is down: still waiting
                raise ApiError(503, str(exc)) from None
            queued = QueuedHandle(self.storage, run_id, events[-1]["seq"] if events else 0)
            self._track(queued, row.get("webhook"),  # type: ignore[arg-type]
                        owner["webhook_secret"])
            return queued                            # type: ignore[return-value]
        handle = await start_decision(run_id, block_id, decision,
                                      by=by["name"], comment=comment,
                                      **await self.run_options(owner))
        self._track(handle, row.get("webhook"), owner["webhook_secret"])
        return handle

    async def _on_pool(self, run_id: str) -> bool:
        """Whether a waiting run continues on the worker pool: with `--workers
        celery`, a run that was queued (one this process started runs here)."""
        if self.settings.workers != "celery":
            return False
        from flowforge.service.pool import born_on_pool
        return await born_on_pool(self.storage, run_id)

    def delivery_options(self) -> dict[str, Any]:
        """How this server delivers webhooks, stored with each run it queues (a
        worker may be the one that delivers)."""
        return delivery_options(self.settings.webhook_attempts, self.settings.webhook_backoff,
                                self.settings.webhook_timeout,
                                self.settings.allow_private_webhooks)

    def _track(self, handle: RunHandle, webhook: str | None, secret: str) -> None:
        self.handles[handle.run_id] = handle
        handle.task.add_done_callback(
            lambda task: self._finished(handle, task, webhook, secret))

    def start_resumer(self) -> None:
        """Resume due `waiting` runs every `resume_interval` seconds (if set)."""
        if self.settings.resume_interval > 0:
            self._spawn(self._resume_due_loop(self.settings.resume_interval))

    async def _resume_due_loop(self, interval: float) -> None:
        while True:
            try:
                await self.resume_due()
            except Exception:  # noqa: BLE001 - logged; the next look tries again
                log.exception("resuming due runs failed")
            await asyncio.sleep(interval)

    async def resume_due(self) -> list[str]:
        """Start every due `waiting` run of a known user here, as its owner (a
        pool run: send it to the pool), and every run a dead process left
        `running` (with resuming off: mark it failed, saying how to resume it);
        the ids started (a run another process took first is left to it)."""
        from flowforge.service.resuming import fail_cut_off

        started = []
        due = list(await self.storage.due_runs(time.time()))
        if self.settings.workers == "celery":
            # pool runs' webhooks no process delivered (the server that queued the run
            # died before it ended, and so did the worker that finished it)
            for run_id in await self.storage.owed_webhooks(time.time()):
                self._spawn(deliver_owed(self.storage, run_id, client=self.http))
        else:                                      # (the pool's workers reap their own)
            cut = await self.cut_off_runs()
            if self.settings.resume_cut_off:
                due += cut
            else:
                for run_id in cut:
                    if await fail_cut_off(self.storage, run_id):
                        log.warning("run %s was cut off by a process that died; marked "
                                    "failed (resuming is off)", run_id)
        for run_id in due:
            if run_id in self.handles:
                continue
            if await self._on_pool(run_id):
                from flowforge.service.pool import requeue_waiting
                if await requeue_waiting(self.storage, run_id):
                    started.append(run_id)
                continue
            row = await self.storage.get_run(run_id)
            owner = await self.storage.get_user(row["user_id"]) \
                if row is not None and row.get("user_id") else None
            if owner is None:
                continue
            try:
                handle = await start_resume(run_id, **await self.run_options(owner))
            except RunStateError:
                continue
            self._track(handle, row.get("webhook"), owner["webhook_secret"])
            started.append(run_id)
        return started

    async def cut_off_runs(self, limit: int = 100) -> list[str]:
        """Runs still marked `running` whose process is gone (its lease lapsed, or
        it was a process of this host that no longer exists): after a crash or a
        restart they are resumed here from their checkpoints, never left running."""
        from flowforge.service.cancel import lease_lapsed

        now = time.time()
        return [row["run_id"] for row in await self.storage.list_runs(status="running",
                                                                      limit=limit)
                if row["run_id"] not in self.handles and lease_lapsed(row, now)]

    async def run_options(self, user: dict[str, Any], services: dict[str, Any] | None = None
                          ) -> dict[str, Any]:
        """What every run of `user` on this server is started (or resumed) with:
        their policy, secrets, stored workflows, shared keys, daily limits."""
        owner = user["user_id"]

        return {"user": {"id": owner, "name": user["name"], "role": user["role"]},
                "storage": self.storage,
                "services": {"files_root": self.settings.files_root,
                             "sandbox_isolated_only": not self.settings.allow_process_sandbox,
                             **self.settings.run_limits(),
                             **(services or {})},
                "model": self.settings.model, "policy": await self.policy(user),
                "secrets": await load_secrets(self.storage, owner),
                "provider_keys": self.settings.shared_provider_keys(),
                "stored_workflows": self.workflows.reader(owner),
                "budget_limits": await self.daily_limits(user)}

    async def daily_limits(self, user: dict[str, Any]) -> list[BudgetLimit]:
        """The server's per-user daily limit, with what the user's runs of the
        day (UTC) have used so far counted against it."""
        tokens, cost = self.settings.daily_user_tokens, self.settings.daily_user_cost
        if tokens is None and cost is None:
            return []
        now = time.time()
        used = await self.storage.user_usage_since(user["user_id"], now - now % 86400)
        return [BudgetLimit(f"the daily limit of user '{user['name']}'", tokens, cost,
                            used_tokens_before=used["tokens"], used_cost_before=used["cost"])]

    async def policy(self, user: dict[str, Any]) -> Policy:
        """What this user's documents and requests may reach of the host (their
        grants, and the server's keys when it shares them): the policy gate."""
        return await policy_for(self.storage, user,
                                shared_keys=self.settings.share_provider_keys)

    async def check_webhook(self, url: str, where: str = "webhook") -> None:
        """Raise 422 naming `where` when the SSRF guard refuses `url`."""
        refusal = await webhook_refusal(url, self.settings.allow_private_webhooks)
        if refusal is not None:
            raise ApiError(422, f"{where}: {refusal}", code="webhook_refused")

    def _finished(self, handle: RunHandle, task: asyncio.Task, webhook: str | None,
                  secret: str, payload: PayloadBuilder | None = None) -> None:
        self.handles.pop(handle.run_id, None)
        self.slots.ended(handle.run_id)
        if task.cancelled():
            return
        if task.exception() is not None:
            log.error("run %s could not be completed: %r", handle.run_id, task.exception())
            return
        if webhook and task.result().status != "waiting":   # a waiting run has not ended
            if getattr(handle, "webhook_owed_on_row", False):
                self._spawn(self._deliver_pool_run(handle, task.result(), webhook, secret))
            else:
                self._spawn(self._deliver(handle, task.result(), webhook, secret, payload))

    async def _deliver_pool_run(self, handle: RunHandle, result: RunResult, url: str,
                                secret: str) -> None:
        """A pool run's webhook is owed on its row: the worker that finished it is
        likely delivering it already (one of us claims it).  A run queued before
        webhooks were owed on rows (no `webhook_state`) is delivered from here."""
        row = await self.storage.get_run(handle.run_id) or {}
        if row.get("webhook_state") is None:
            await self._deliver(handle, result, url, secret)
        else:
            await deliver_owed(self.storage, handle.run_id, client=self.http)

    async def _deliver(self, handle: RunHandle, result: RunResult, url: str,
                       secret: str, build: PayloadBuilder | None = None) -> None:
        redact = handle.recorder.redact if handle.recorder else (lambda data: data)
        row = await self.storage.get_run(handle.run_id)
        payload = redact(await build(result, row) if build is not None
                         else webhook_payload(result, row))
        tracer = handle.run.tracer
        await deliver_webhook(self.storage, self.http, handle.run_id, url, payload, secret,
                              attempts=self.settings.webhook_attempts,
                              backoff=self.settings.webhook_backoff,
                              allow_private=self.settings.allow_private_webhooks,
                              traceparent=tracer.traceparent() if tracer is not None else None)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def cancel(self, run_id: str) -> RunHandle | None:
        """Cancel a run of this process; None when it is not running here."""
        handle = self.handles.get(run_id)
        if handle is not None:
            handle.cancel()
        return handle

    async def shutdown(self) -> None:
        """Cancel what is still running (their records end `cancelled`), let
        pending webhook deliveries finish their current attempt, close."""
        handles = list(self.handles.values())
        for handle in handles:
            handle.cancel()
        if handles:
            await asyncio.gather(*(h.task for h in handles), return_exceptions=True)
        for task in list(self.background):
            task.cancel()
        if self.background:
            await asyncio.gather(*self.background, return_exceptions=True)
        self.workflows.compiler.close()
        await self.http.aclose()
