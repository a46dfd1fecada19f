"""A person's decision on a run's `approval` block, and the run going on.

`decide` checks that the run is `waiting` and that the block is an approval
waiting for a decision, then resumes the run from its checkpoints with the
decision (`{decision, by, at, comment}`) injected: the block settles with it
(its output, and an `approval_decided` event in the run's record) and the
run continues, or routes to `on_reject`, or fails.  Who may decide is the
caller's business (the server: the run's owner or an admin)."""

from __future__ import annotations

import time
from typing import Any

from flowforge.errors import NotFound
from flowforge.service.resuming import start_resume
from flowforge.service.runs import RunHandle, RunStateError, StorageArg, open_storage
from flowforge.engine.result import RunResult
from flowforge.blocks.approval import DECISIONS
from flowforge.storage.base import Storage

__all__ = ["decide", "start_decision", "check_decision"]


async def check_decision(storage: Storage, run_id: str, block_id: str, decision: str
                         ) -> dict[str, Any]:
    """The run row when `block_id` of `run_id` waits for a decision; else
    NotFound / RunStateError / ValueError saying what is wrong."""
    if decision not in DECISIONS:
        raise ValueError(f"'{decision}' is not a decision: approve or reject")
    row = await storage.get_run(run_id)
    if row is None:
        raise NotFound(f"no run with id '{run_id}' in {storage.url}")
    if row["status"] != "waiting":
        raise RunStateError(f"run {run_id} is not waiting for a decision (it is "
                            f"{row['status']})")
    waiting = [b for b in await storage.get_blocks(run_id)
               if b["scope"] == "" and b["status"] == "waiting" and b.get("type") == "approval"]
    if not any(b["block_id"] == block_id for b in waiting):
        names = ", ".join(b["block_id"] for b in waiting) or "none"
        raise NotFound(f"block '{block_id}' of run {run_id} is not waiting for a decision "
                       f"(approvals waiting: {names})")
    return row


async def start_decision(run_id: str, block_id: str, decision: str, *, by: str | None,
                         storage: Storage, comment: str | None = None,
                         **options: Any) -> RunHandle:
    """Check, then resume the run in the background with the decision injected."""
    await check_decision(storage, run_id, block_id, decision)
    made = {"decision": decision, "by": by, "at": time.time(), "comment": comment}
    return await start_resume(run_id, storage=storage, decisions={block_id: made}, **options)


async def decide(run_id: str, block_id: str, decision: str, *, by: str | None,
                 comment: str | None = None, storage: StorageArg = None,
                 **options: Any) -> RunResult:
    """Approve or reject, and run the run on to its next stop; its result."""
    async with open_storage(storage) as opened:
        if opened is None:
            raise NotFound("deciding on an approval needs storage")
        handle = await start_decision(run_id, block_id, decision, by=by, storage=opened,
                                      comment=comment, **options)
        return await handle.wait()
