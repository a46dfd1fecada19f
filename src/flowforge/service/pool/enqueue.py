"""Queueing a run: the document and the user's grants are checked, the run is
stored as `queued` with a `run_queued` event saying how it must run (model,
whether it is trusted, files root: never a secret), then its id goes to the
broker.  A run stored whose message never left (the process died, the broker
was away) is not lost: a reaper finds it (`reaper._lost`)."""

from __future__ import annotations

import logging
import time
from typing import Any

from flowforge.engine.ids import new_run_id
from flowforge.service.cancel import process_id
from flowforge.service.loading import load
from flowforge.service.pool.broker import QUEUED_PRIORITY, QueueError, default_queue, send_run
from flowforge.service.runs import idempotency_columns, open_storage
from flowforge.workflow.paths import DOCUMENT_DIR, document_folder
from flowforge.workflow.policy import TRUSTED, Policy, check_policy

__all__ = ["enqueue"]

log = logging.getLogger("flowforge.queue")


async def enqueue(workflow: Any, inputs: dict[str, Any] | None = None, *,
                  user: str | dict[str, Any] | None = None, storage: Any = None,
                  model: str | None = None, policy: Policy = TRUSTED,
                  files_root: str | None = None, queue: str | None = None,
                  broker: str | None = None, run_id: str | None = None,
                  workflow_version: int | None = None,
                  share_provider_keys: bool = False, budget: Any = None,
                  resume_cut_off: bool | None = None, webhook: str | None = None,
                  webhook_delivery: dict[str, Any] | None = None,
                  idempotency: tuple[str, str] | None = None,
                  limits: dict[str, int] | None = None) -> str:
    """Store the run as `queued` and hand it to the pool; its id.

    `resume_cut_off` (default: this process's `FLOWFORGE_RESUME_CUT_OFF`) is the
    submitter's choice for the run if a process running it dies: stored with
    the run, so every worker and reaper that finds it cut off honours it (a
    worker's own `--no-resume` still applies to every run it finds).

    `webhook`: POSTed when the run ends by whichever process sees it ended
    first (`owed.deliver_owed`), as `webhook_delivery`
    (`webhooks.delivery_options`) says; the caller checked the URL.

    `idempotency` (key, request fingerprint) is stored in the row: when the
    user already has a run with that key, IdempotencyKeyTaken and nothing is
    queued.

    `limits` (a server's `max_run_events`, `max_loop_passes`) travel with the
    run: the worker gives them to it as services."""
    from flowforge.engine.inputs import validate_inputs
    from flowforge.service.pool.broker import celery_app
    from flowforge.service.resuming import resume_cut_off as resuming_here

    celery_app(broker)                    # no broker configured: say so before storing
    queue = queue or default_queue()
    compiled = load(workflow)
    check_policy(compiled, policy, model_override=model)
    validate_inputs(compiled.doc.inputs, inputs or {})
    user_id = (user.get("id") if isinstance(user, dict) else user) or "default"
    run_id = run_id or new_run_id()
    async with open_storage(storage) as opened:
        if opened is None:
            raise QueueError("a queued run needs the run storage (workers read it): give a "
                             "database, not storage=False")
        now = time.time()
        await opened.create_run({
            "run_id": run_id, "workflow_id": compiled.id, "workflow_version": workflow_version,
            "user_id": user_id, "status": "queued", "inputs": inputs or {},
            "created_at": now, "document": compiled.document,
            # a request's budget travels with the run, as for a run in a process
            "budget": budget if budget is None or isinstance(budget, dict)
            else budget.model_dump(), **idempotency_columns(idempotency),
            **({"webhook": webhook, "webhook_state": "pending"} if webhook else {})})
        await opened.record(run_id, [{
            "seq": 1, "type": "run_queued", "run_id": run_id, "time": now, "block_id": None,
            "queue": queue, "model": model, "trusted": policy is TRUSTED,
            "files_root": files_root, "share_provider_keys": share_provider_keys,
            # a CLI run's paths resolve against its document's folder on any worker
            **({DOCUMENT_DIR: str(document_folder(compiled.source).resolve())}
               if compiled.source is not None and policy is TRUSTED else {}),
            "resume_cut_off": resuming_here() if resume_cut_off is None else resume_cut_off,
            **({"webhook_delivery": webhook_delivery or {}} if webhook else {}),
            **({"limits": limits} if limits else {}),
            "by": process_id()}], [])
        database = opened.url
    try:
        send_run(run_id, database, queue=queue, priority=QUEUED_PRIORITY, broker=broker)
    except QueueError as exc:
        # The run is stored: a worker's reaper sends it once the broker answers again
        # (a queued run nobody took for a lease, while its queue is empty).  Failing
        # here would make a caller retry, and run it twice.
        log.warning("%s; the run is stored as queued and a worker's reaper will send it "
                    "when the broker is back", exc)
    return run_id
