"""Continuing a run from its checkpoints: one cut off by a crash, one that
failed or was cancelled, or one `waiting` for a time or a person.

Blocks that succeeded are restored, not run again (what they spent still
counts against the run's budget), and so are failures, except those that
failed a run being tried again (`_checkpoint`); blocks the cut caught running
get a terminal event first; blocks that suspended the run find what they stored
(`context.resume_state`), with a person's decision injected for an approval.
A lease on the run row (and, for a `waiting` run, a compare-and-set of its
status) makes sure one process resumes it.

A run whose process died while running it may be what killed the process
(a block that takes all the memory): each such resume is counted on its row
(`cut_off_resumes`), and once its process died `MAX_DEATHS` times it is
failed, saying so, instead of being resumed into the same death forever.  A
person may still resume it (`flowforge runs resume`): it failed, so that is a
retry, which is not counted.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Awaitable, Callable

from flowforge.engine.result import RunResult
from flowforge.service.cancel import (LEASE_SECONDS, cancelled_events, claim_abandoned,
                                      lease_holder_alive, process_id)
from flowforge.service.loading import load_stored
from flowforge.service.runs import (RunHandle, RunStateError, StorageArg, stored_run,
                                    open_storage, start_run)
from flowforge.storage import Storage
from flowforge.workflow.graph import CompiledWorkflow

__all__ = ["resume", "start_resume", "resume_due", "resume_cut_off", "fail_cut_off",
           "RESUME_CUT_OFF_ENV", "MAX_DEATHS_ENV", "max_deaths", "RunDiedTooOften"]

#: `0` (or false/no/off): runs cut off by a process that died are marked failed,
#: saying how to resume them, instead of being resumed (`--no-resume`).
RESUME_CUT_OFF_ENV = "FLOWFORGE_RESUME_CUT_OFF"
#: How many times a run's process may die while running it before the run is
#: failed instead of resumed again (default 2: it is resumed once).
MAX_DEATHS_ENV = "FLOWFORGE_MAX_RUN_DEATHS"

log = logging.getLogger("flowforge.resume")


def max_deaths() -> int:
    """FLOWFORGE_MAX_RUN_DEATHS (default 2, at least 1)."""
    value = os.environ.get(MAX_DEATHS_ENV, "").strip()
    return max(1, int(value)) if value.isdigit() else 2


class RunDiedTooOften(RunStateError):
    """A cut-off run was failed instead of resumed: its process died too often."""


def resume_cut_off() -> bool:
    """Whether runs a dead process left `running` are resumed here (the default)
    or failed with the reason (FLOWFORGE_RESUME_CUT_OFF=0, `--no-resume`)."""
    return os.environ.get(RESUME_CUT_OFF_ENV, "1").strip().lower() not in \
        ("0", "false", "no", "off")


async def fail_cut_off(storage: Storage, run_id: str, *, where: str = "here") -> bool:
    """Mark a run cut off by a dead process `failed`, naming the process and how
    to resume it; False when it is not cut off (a live process runs it, it
    ended, another process took it first).  Its lease is taken first (the same
    compare-and-set as a resume), so a run is never both failed and resumed.
    `where` resuming was turned off: "here", or "where the run was queued" (a
    server's or CLI's choice stored with a pool run)."""
    claimed = await claim_abandoned(storage, run_id)
    if claimed is None:
        return False
    _, holder = claimed
    error = (f"cut off: the process that ran it ({holder or 'unknown'}) is gone, and "
             f"resuming cut-off runs is off {where} ({RESUME_CUT_OFF_ENV}=0 or --no-resume); "
             f"its succeeded blocks are kept: resume it with `flowforge runs resume "
             f"{run_id}`")
    await _close_failed(storage, run_id, await storage.get_events(run_id),
                        await storage.get_blocks(run_id), error)
    return True


async def _close_failed(storage: Storage, run_id: str, events: list[dict[str, Any]],
                        blocks: list[dict[str, Any]], error: str) -> None:
    """End a cut-off run whose lease this process holds `failed` with `error`:
    the blocks its dead process left running get their terminal events."""
    now = time.time()
    seq = events[-1]["seq"] if events else 0
    running = [b for b in blocks if b["status"] == "running"]
    closing = cancelled_events(run_id, running, seq + 1, now, "the process running the run "
                               "ended before the block finished")
    closing.append({"seq": seq + 1 + len(running), "type": "run_finished", "run_id": run_id,
                    "time": now, "status": "failed", "error": error})
    await storage.record(run_id, closing, [
        {"scope": b["scope"], "block_id": b["block_id"], "status": "cancelled",
         "finished_at": now, "reason": "cut off; not resumed"} for b in running])
    await storage.update_run(run_id, status="failed", finished_at=now, error=error,
                             lease_owner=None, lease_expires_at=None)


def _died_too_often(run_id: str, deaths: int, blocks: list[dict[str, Any]]) -> str:
    times = "twice" if deaths == 2 else "once" if deaths == 1 else f"{deaths} times"
    running = sorted({b["block_id"] for b in blocks if b["status"] == "running"})
    where = (f"block{'s' if len(running) > 1 else ''} {', '.join(running)} "
             f"{'were' if len(running) > 1 else 'was'} running when it last died"
             if running else "no block was running when it last died")
    return (f"its process died {times} while running it; not resumed again: {where} "
            f"(a block that takes all the memory or crashes the process would kill the "
            f"next one too).  Its succeeded blocks are kept: once the cause is fixed, "
            f"resume it with `flowforge runs resume {run_id}` (the limit: "
            f"{MAX_DEATHS_ENV}={max_deaths()})")


async def resume(run_id: str, *, storage: StorageArg = None, model: str | None = None,
                 services: dict[str, Any] | None = None,
                 decisions: dict[str, dict[str, Any]] | None = None,
                 **options: Any) -> RunResult:
    """Finish a run that was cut off, or continue a `waiting` one: blocks
    that already succeeded (stored checkpoints) are not run again; the rest
    run as usual.  `decisions` (block id -> `{decision, by, at, comment}`)
    reach approval blocks; other `options` are `start_run`'s (a server
    passes the run owner's policy, secrets, ...)."""
    async with open_storage(storage) as opened:
        handle = await start_resume(run_id, storage=opened, model=model, services=services,
                                    decisions=decisions, **options)
        return await handle.wait()


async def start_resume(run_id: str, *, storage: Storage | None,
                       decisions: dict[str, dict[str, Any]] | None = None,
                       row: dict[str, Any] | None = None,
                       taken: dict[str, Any] | None = None, **options: Any) -> RunHandle:
    """`resume`, started in the background on an open storage: the handle.
    `row`: the run's row as the caller just read it (a worker), not read again:
    the lease is taken only if its status is still the one in it.  `taken`:
    what the caller's `storage.take_run` returned (this process holds the
    lease; the row, events and checkpoints in it were read after the claim):
    nothing is claimed or read again."""
    opened = storage
    if taken is None:
        taken = await _take(opened, run_id, row)
    row = taken["row"]
    run_id = row["run_id"]
    if row["status"] == "running":          # cut off: its process died while running it
        deaths = int(row.get("cut_off_resumes") or 0) + 1
        if deaths >= max_deaths():
            error = _died_too_often(run_id, deaths, taken["blocks"])
            try:
                await _close_failed(opened, run_id, taken["events"], taken["blocks"], error)
            except BaseException:
                await opened.update_run(run_id, lease_owner=None, lease_expires_at=None)
                raise
            log.error("run %s failed instead of resumed: %s", run_id, error)
            raise RunDiedTooOften(f"run {run_id} failed: {error}")
        await opened.update_run(run_id, cut_off_resumes=deaths)
    if row["status"] == "waiting" and not await opened.take_waiting(run_id):
        await opened.update_run(run_id, lease_owner=None, lease_expires_at=None)
        raise RunStateError(f"run {run_id} is no longer waiting: another request resumed "
                            f"it first")
    try:
        compiled: CompiledWorkflow = load_stored(row["document"])
        # Read once the lease was held (`take_run`): nothing is added to them meanwhile.
        events, blocks = taken["events"], taken["blocks"]
        seq = events[-1]["seq"] if events else 0
        checkpoint = _checkpoint(compiled, row["status"], blocks)
        children: dict[str, dict[str, tuple[str, Any]]] = {}
        for b in blocks:
            if b["scope"] and b["status"] == "succeeded":
                children.setdefault(b["scope"], {})[b["block_id"]] = (b["status"], b["output"])
        # Blocks that paused the run find what they stored (and a decision, if given).
        resume_state = {b["block_id"]: dict(b["output"] or {}) for b in blocks
                        if b["scope"] == "" and b["status"] == "waiting"}
        for block_id, decision in (decisions or {}).items():
            resume_state.setdefault(block_id, {})["decision"] = decision
        # Blocks the cut caught running get a terminal event before anything runs again.
        cut = [b for b in blocks if b["status"] == "running"]
        closing = cancelled_events(run_id, cut, seq + 1, time.time(), "the process running "
                                   "the run ended before the block finished; it runs again "
                                   "on resume", runs_again=True)
        seq += len(cut)
        if closing:
            await opened.record(run_id, closing, [
                {"scope": b["scope"], "block_id": b["block_id"], "status": "cancelled",
                 "finished_at": time.time(), "reason": "cut off; resumed"} for b in cut])
        options.setdefault("user", row["user_id"])
        options.setdefault("budget", row.get("budget"))
        handle = await start_run(compiled, row["inputs"], storage=opened, run_id=run_id,
                                 checkpoint=checkpoint, child_checkpoints=children,
                                 start_seq=seq, workflow_version=row.get("workflow_version"),
                                 # a queued run: a worker starts it now
                                 started_at=time.time() if row.get("started_at") is None
                                 else None, **options)
    except BaseException:
        await opened.update_run(run_id, lease_owner=None, lease_expires_at=None)
        raise
    handle.run.resume_state = resume_state
    return handle


def _checkpoint(compiled: CompiledWorkflow, status: str, blocks: list[dict[str, Any]]
                ) -> dict[str, tuple[str, Any]]:
    """The top-level outcomes a resume keeps: every success, and the failures
    that are not to be tried again.  A run resumed to go on (`waiting` for a
    decision or a time, or cut off `running`) keeps all its failures: its
    other branches run on and it ends failed.  A run resumed after it ended
    failed or cancelled is being tried again: the failures that failed it run
    again, while a failure its `on_error` block handled stays (the handler's
    branch was the one taken; running the block again could take both)."""
    go_on = status in ("waiting", "running", "queued")
    nodes = compiled.graph.nodes
    kept: dict[str, tuple[str, Any]] = {}
    for b in blocks:
        if b["scope"] != "":
            continue
        if b["status"] == "succeeded":
            kept[b["block_id"]] = ("succeeded", b["output"])
        elif b["status"] == "failed" and (go_on or (
                b["block_id"] in nodes and nodes[b["block_id"]].spec.on_error is not None)):
            kept[b["block_id"]] = ("failed", {"error": b.get("error")})
    return kept


async def _take(opened: Storage, run_id: str, row: dict[str, Any] | None) -> dict[str, Any]:
    """The run's lease for this process, with what `take_run` read after it;
    RunStateError when the run succeeded or another live process holds it."""
    if row is None:
        row = await stored_run(opened, run_id, "resuming")
    run_id = row["run_id"]
    if row["status"] == "succeeded":
        # (A failed or cancelled run may be resumed: the failures that failed it run again.)
        raise RunStateError(f"run {run_id} already succeeded: there is nothing to "
                            f"resume; start a new run instead")
    holder = row.get("lease_owner")
    alive = lease_holder_alive(holder)
    taken = await opened.take_run(run_id, process_id(), LEASE_SECONDS,
                                  expected_owner=holder if alive is False else None,
                                  expected_status=row["status"])
    if taken is not None:
        return taken
    now_row = await opened.get_run(run_id) or row
    if now_row["status"] != row["status"]:
        raise RunStateError(f"run {run_id} became {now_row['status']} (another process "
                            f"ran it) just as this one was to resume it: left alone")
    left = max(0.0, (row.get("lease_expires_at") or 0) - time.time())
    raise RunStateError(
        f"run {run_id} is being run by another live process ({holder}; its lease "
        f"runs {left:.0f} s more unless renewed): cancel it (`flowforge runs cancel "
        f"{run_id}`) or wait for it to end")


async def resume_due(*, storage: StorageArg = None, now: float | None = None,
                     options_for: Callable[[dict[str, Any]], Any] | None = None,
                     leave: Callable[[Storage, str], Awaitable[bool]] | None = None
                     ) -> list[RunResult]:
    """Resume every `waiting` run whose time has come (a `wait` block's end,
    an approval's timeout), one after the other; a run another process took
    first is left to it.  `options_for(row)` (awaitable) gives a server's
    options for the run's owner; without it (the CLI, trusted) the runs of a
    server's users are left to the server, which resumes them with their
    owner's rights, not the machine's.  `leave(storage, run_id)` (awaitable)
    True: the run is someone else's (the CLI, with a broker, leaves the pool's
    runs to the pool)."""
    results = []
    async with open_storage(storage) as opened:
        for run_id in await opened.due_runs(time.time() if now is None else now):
            row = await opened.get_run(run_id)
            if row is None or row["status"] != "waiting":
                continue
            if leave is not None and await leave(opened, run_id):
                continue
            if options_for is None and row.get("user_id") and \
                    await opened.get_user(row["user_id"]) is not None:
                continue
            options = await options_for(row) if options_for is not None else {}
            try:
                handle = await start_resume(run_id, storage=opened, **options)
            except RunStateError:
                continue
            results.append(await handle.wait())
    return results
