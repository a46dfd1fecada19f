"""Cancelling a run wherever it runs, and the lease that says who runs it.

A run executes in one process (a CLI, one of a server's processes, later a
worker), but the cancel request may arrive anywhere.  The request is a mark
on the run's row (`cancel_requested_at`); each process that runs runs with
storage watches the rows of its own runs — one query per `poll_interval` for
all of them, only while it has any — and cancels the ones marked.  A run
cancelled this way ends `cancelled` and is recorded like any other.

The same loop renews the process's leases on its runs (`lease_owner`,
`lease_expires_at` on the row): a lease is what stops a second process from
resuming a run that is still running, and what lets one take over a run whose
process died (the lease expires within `LEASE_SECONDS`; on the same host a
dead process's lease is taken at once).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
import weakref
from typing import Any, Callable

from flowforge.processes import process_exists
from flowforge.storage import Storage
from flowforge.storage.base import TERMINAL_STATUSES

__all__ = ["request_cancel", "cancel_abandoned", "claim_abandoned", "end_or_cancel_abandoned",
           "wait_until_ended", "watch_for_cancel", "forget_run", "host_name", "PROCESS",
           "LEASE_SECONDS", "lease_holder_alive", "lease_lapsed", "process_id"]


def host_name() -> str:
    """This machine, as leases name it: FLOWFORGE_HOST, else the hostname.  (Set it
    where two machines share a hostname, e.g. containers with their own process
    ids: a lease is taken from a dead process at once only on its own host.)"""
    return os.environ.get("FLOWFORGE_HOST") or socket.gethostname()


def _this_process() -> str:
    return f"{host_name()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


#: This process, as a lease owner: host, pid and a random part (pids are reused).
#: Read it as `cancel.PROCESS` at the time of use: a forked child (a worker pool's
#: process) gets its own, or two children would hold one lease.
PROCESS = _this_process()


def _after_fork() -> None:
    global PROCESS
    PROCESS = _this_process()
    for storage_watcher in list(_WATCHERS):
        storage_watcher.runs.clear()
        storage_watcher.on_lost.clear()
        storage_watcher.task = None


os.register_at_fork(after_in_child=_after_fork)
def _lease_seconds() -> float:
    try:
        value = float(os.environ.get("FLOWFORGE_LEASE_SECONDS") or 15.0)
    except ValueError:
        return 15.0
    return value if value >= 1.0 else 15.0


#: How long a lease lasts without renewal (FLOWFORGE_LEASE_SECONDS, default 15);
#: renewed every third of it.  A worker pool's takeover time follows it.
LEASE_SECONDS = _lease_seconds()


def lease_holder_alive(owner: str | None) -> bool | None:
    """Whether the process holding a lease still exists: known only for one on
    this host (None otherwise: then only the lease's expiry tells)."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != host_name() or not pid.isdigit():
        return None
    if owner == PROCESS:
        return True
    return process_exists(int(pid))

def lease_lapsed(row: dict[str, Any], now: float | None = None) -> bool:
    """Whether no process runs this run any more: its lease expired (or was never
    set), or its holder was a process of this host that no longer exists."""
    now = time.time() if now is None else now
    return (row.get("lease_expires_at") or 0) < now or \
        lease_holder_alive(row.get("lease_owner")) is False


log = logging.getLogger("flowforge.cancel")


def cancelled_events(run_id: str, blocks: list[dict[str, Any]], first_seq: int, now: float,
                     reason: str, runs_again: bool = False) -> list[dict[str, Any]]:
    """`block_cancelled` events, numbered from `first_seq`, for blocks (checkpoint
    rows) a run left open - running when its process died, waiting when it was
    cancelled: every block gets a terminal event, and its checkpoint follows.
    `runs_again`: the block was in flight when its process was cut off and the
    resume starts it again (`"runs_again": true`): its side effects may happen
    twice (with the same idempotency key), and the record says so."""
    again = {"runs_again": True} if runs_again else {}
    return [{"seq": first_seq + i, "type": "block_cancelled", "run_id": run_id, "time": now,
             "block_id": b["block_id"], "scope": b["scope"] or None,
             "block_type": b.get("type"), "reason": reason, **again}
            for i, b in enumerate(blocks)]


async def request_cancel(storage: Storage, run_id: str) -> None:
    """Mark the run: whichever process runs it cancels it within `poll_interval`.
    A `waiting` run, which no process runs, is cancelled here and then: its
    waiting blocks and those pending behind them get `block_cancelled` events
    and its stream ends with `run_finished`."""
    now = time.time()
    if await storage.cancel_waiting(run_id, now):
        events = await storage.get_events(run_id)
        seq = events[-1]["seq"] + 1 if events else 1
        waiting = [b for b in await storage.get_blocks(run_id)
                   if b["status"] in ("waiting", "pending")]
        closing = cancelled_events(run_id, waiting, seq, now,
                                   "the run was cancelled while it waited")
        closing.append({"seq": seq + len(waiting), "type": "run_finished", "run_id": run_id,
                        "time": now, "status": "cancelled",
                        "error": "the run was cancelled while waiting"})
        await storage.record(run_id, closing, [])
        return
    await storage.update_run(run_id, cancel_requested_at=now)


async def claim_abandoned(storage: Storage, run_id: str
                          ) -> tuple[dict[str, Any], str | None] | None:
    """The row of a run no process runs any more (`running`, its lease lapsed),
    with its lease now held here, and the process that held it before; None
    when a live process holds it, it ended, or another process claimed it
    first.  The compare-and-set a resume uses: a run is never both ended here
    and resumed elsewhere."""
    row = await storage.get_run(run_id)
    if row is None or row["status"] != "running" or not lease_lapsed(row):
        return None
    holder = row.get("lease_owner")
    if not await storage.claim_run(run_id, process_id(), LEASE_SECONDS,
                                   expected_owner=holder if lease_holder_alive(holder)
                                   is False else None):
        return None
    now_row = await storage.get_run(run_id)
    if now_row is None or now_row["status"] != "running":
        await storage.update_run(run_id, lease_owner=None, lease_expires_at=None)
        return None
    return now_row, holder


async def cancel_abandoned(storage: Storage, run_id: str) -> bool:
    """End `cancelled`, here and now, a run no process runs any more (`running`
    with its lease lapsed: the server or worker that ran it is down), as its own
    process would have: its open blocks get their terminal events, its
    succeeded blocks are kept.  False when a live process holds it (it cancels
    the run itself, seeing the request) or it ended."""
    claimed = await claim_abandoned(storage, run_id)
    if claimed is None:
        return False
    row, _ = claimed
    now = time.time()
    events = await storage.get_events(run_id)
    seq = events[-1]["seq"] + 1 if events else 1
    open_blocks = [b for b in await storage.get_blocks(run_id)
                   if b["status"] in ("running", "waiting")]
    closing = cancelled_events(run_id, open_blocks, seq, now, "the run was cancelled; the "
                               "process that ran it is gone")
    error = "the run was cancelled (no process was running it: cancelled from the store)"
    closing.append({"seq": seq + len(open_blocks), "type": "run_finished", "run_id": run_id,
                    "time": now, "status": "cancelled", "error": error})
    await storage.record(run_id, closing, [
        {"scope": b["scope"], "block_id": b["block_id"], "status": "cancelled",
         "finished_at": now, "reason": "cancelled"} for b in open_blocks])
    await storage.update_run(run_id, status="cancelled", finished_at=now, error=error,
                             cancel_requested_at=row.get("cancel_requested_at") or now,
                             lease_owner=None, lease_expires_at=None)
    return True


async def wait_until_ended(storage: Storage, run_id: str, timeout: float) -> bool:
    """True once the run's row says it ended (or it is gone); False after `timeout` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        row = await storage.get_run(run_id)
        if row is None or row["status"] in TERMINAL_STATUSES:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(min(storage.poll_interval, 0.1))


async def end_or_cancel_abandoned(storage: Storage, run_id: str, wait: float) -> bool:
    """After a cancel request: wait up to `wait` s for the run to end; a run no
    process runs (now, or once its lease lapses meanwhile) is cancelled here
    (`cancel_abandoned`), so a cancel works with the server down.  True once
    it ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        if await cancel_abandoned(storage, run_id):
            return True
        if await wait_until_ended(storage, run_id, min(1.0, max(0.0, deadline - loop.time()))):
            return True
        if loop.time() >= deadline:
            return False


class _Watcher:
    """The runs one storage object is running in this process, and the task
    that polls their rows for cancel requests."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.runs: dict[str, Any] = {}             # run id -> Run
        self.on_lost: dict[str, Callable[[], None]] = {}
        self.task: asyncio.Task | None = None

    def watch(self, run: Any, on_lost: Callable[[], None] | None = None) -> None:
        self.runs[run.run_id] = run
        if on_lost is not None:
            self.on_lost[run.run_id] = on_lost
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self._poll(), name="flowforge-cancel-watcher")

    async def _poll(self) -> None:
        renewed = time.monotonic()
        while self.runs:
            await asyncio.sleep(self.storage.poll_interval)
            ids = list(self.runs)
            if not ids:
                break
            try:
                if time.monotonic() - renewed >= LEASE_SECONDS / 3:
                    lost = await self.storage.renew_leases(ids, process_id(), LEASE_SECONDS)
                    renewed = time.monotonic()
                    for run_id in lost:      # taken over: another process runs it now
                        self.runs.pop(run_id, None)
                        on_lost = self.on_lost.pop(run_id, None)
                        if on_lost is not None:
                            on_lost()
                marked = await self.storage.cancel_requests(ids)
            except Exception as exc:  # noqa: BLE001 - a busy, full or restarting database:
                # next time (this task watches every run of the process: it must not die)
                log.warning("could not check runs for cancel requests: %s", exc)
                continue
            for run_id in marked:
                run = self.runs.pop(run_id, None)
                if run is not None:
                    run.cancel()


_WATCHERS: "weakref.WeakSet[_Watcher]" = weakref.WeakSet()


def _watcher(storage: Storage) -> _Watcher:
    watcher = storage.__dict__.get("_cancel_watcher")
    if watcher is None:
        watcher = storage.__dict__["_cancel_watcher"] = _Watcher(storage)
        _WATCHERS.add(watcher)
    return watcher


def process_id() -> str:
    """This process as a lease owner (see `PROCESS`)."""
    return PROCESS


def watch_for_cancel(storage: Storage, run: Any,
                     on_lost: Callable[[], None] | None = None) -> None:
    """Cancel `run` (a `Run`) when its row gets a cancel request; call `on_lost()`
    (and stop watching) if another process took its lease: this process was
    stalled past the lease and must stop, writing nothing more (fencing)."""
    _watcher(storage).watch(run, on_lost)


def forget_run(storage: Storage, run_id: str) -> None:
    watcher = _watcher(storage)
    watcher.runs.pop(run_id, None)
    watcher.on_lost.pop(run_id, None)
