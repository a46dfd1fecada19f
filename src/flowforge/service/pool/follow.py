"""Following a run on the worker pool from the process that queued it (a
server, `flowforge runs approve` with a broker): a handle shaped like a run
of one's own, whose task ends when the stored run ends or waits, and the
run's `RunResult` as the storage has it (what another process ran)."""

from __future__ import annotations

import asyncio
from typing import Any

from flowforge.errors import StorageError
from flowforge.service.cancel import request_cancel
from flowforge.service.pool.enqueue import enqueue
from flowforge.storage.base import TERMINAL_STATUSES

__all__ = ["QueuedHandle", "start_queued", "stored_result"]


async def stored_result(storage: Any, run_id: str) -> Any:
    """The `RunResult` of a run as its storage has it (a run another process ran)."""
    from flowforge.engine.result import BlockRecord, RunResult

    row = await storage.get_run(run_id)
    if row is None:
        raise StorageError(f"run {run_id} is not in {storage.url}")
    blocks = [b for b in await storage.get_blocks(run_id) if not b["scope"]]
    return RunResult(
        run_id=run_id, workflow_id=row["workflow_id"], status=row["status"],
        outputs=row.get("outputs") or {},
        results={b["block_id"]: b["output"] for b in blocks if b["status"] == "succeeded"},
        blocks={b["block_id"]: BlockRecord(status=b["status"], started_at=b.get("started_at"),
                                           finished_at=b.get("finished_at"),
                                           error=b.get("error"), type=b.get("type") or "",
                                           reason=b.get("reason")) for b in blocks},
        usage=row.get("usage") or {}, memory=row.get("memory") or {},
        events=await storage.get_events(run_id), error=row.get("error"))


class _NoRun:
    """What a server's code reads of `handle.run` for a run another process runs."""
    tracer = None


class QueuedHandle:
    """A run on the pool, as a server holds a run of its own: `task` ends when the
    run ends (followed through its stored events), `cancel()` marks its row."""

    run = _NoRun()
    recorder = None
    #: Its webhook (if any) is owed on the run row: whoever sees the run ended
    #: first delivers it (`webhooks.deliver_owed`), not the follower itself.
    webhook_owed_on_row = True

    def __init__(self, storage: Any, run_id: str, after_seq: int = 0) -> None:
        self.storage, self.run_id = storage, run_id
        self.task = asyncio.get_running_loop().create_task(self._follow(after_seq))

    async def _follow(self, after_seq: int) -> Any:
        """Until the run stops: it ends, or waits (again: the handle is made while
        the run is `queued`), as a run's own handle does."""
        async for _event in self.storage.follow_events(self.run_id, after_seq):
            pass
        while (await self.storage.get_run(self.run_id) or {}).get("status") not in \
                (*TERMINAL_STATUSES, "waiting"):
            await asyncio.sleep(self.storage.poll_interval)
        return await stored_result(self.storage, self.run_id)

    def cancel(self) -> None:
        asyncio.get_running_loop().create_task(request_cancel(self.storage, self.run_id))

    async def wait(self) -> Any:
        return await asyncio.shield(self.task)


async def start_queued(workflow: Any, inputs: dict[str, Any], *, storage: Any,
                       **options: Any) -> QueuedHandle:
    """`enqueue` for a server: the run goes to the pool; the handle follows it."""
    run_id = await enqueue(workflow, inputs, storage=storage, **options)
    return QueuedHandle(storage, run_id)
