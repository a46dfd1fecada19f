"""Several runs at once in one worker process (`--concurrency`), on one event
loop, and several processes (`--processes`): runs overlap instead of queueing
behind each other, and each still ends with its events stored."""

from __future__ import annotations

from flowforge.service.pool import enqueue
from flowforge.storage import storage_from_url
from tests.workers.test_pool import chain, ended, wait_for


async def _run_all(pool, tmp_path, runs: int) -> list[list[str]]:
    """`runs` one-block runs (the block sleeps 5 s: on a loaded machine the last
    run may start seconds after the first) logging to one file: its lines."""
    storage = storage_from_url(pool.database)
    await storage.open()
    log = tmp_path / "all.log"
    try:
        ids = [await enqueue(chain(1, 5.0, log), storage=storage, queue=pool.queue)
               for _ in range(runs)]
        rows = [await wait_for(storage, run_id, ended, timeout=90) for run_id in ids]
        for run_id in ids:
            kinds = [e["type"] for e in await storage.get_events(run_id)]
            assert kinds[0] == "run_queued" and kinds[-1] == "run_finished"
    finally:
        await storage.close()
    assert {row["status"] for row in rows} == {"succeeded"}
    return [line.split() for line in log.read_text().splitlines()]


async def test_one_worker_process_runs_several_runs_at_once(pool, tmp_path):
    worker = pool.start(concurrency=3)
    pool.wait_ready(worker)
    lines = await _run_all(pool, tmp_path, 3)
    # every block started before any ended: the three ran together (one at a
    # time, each would have ended before the next started)
    assert [line[0] for line in lines] == ["start"] * 3 + ["end"] * 3, lines
    assert len({line[3] for line in lines}) == 1              # in one process


async def test_several_processes_each_run_several_runs_at_once(pool, tmp_path):
    worker = pool.start(concurrency=2, processes=2)
    pool.wait_ready(worker, processes=2)
    lines = await _run_all(pool, tmp_path, 4)
    assert [line[0] for line in lines] == ["start"] * 4 + ["end"] * 4, lines
    assert len({line[3] for line in lines}) == 2              # two processes, two each


async def test_a_copy_of_a_message_for_a_run_this_process_runs_does_not_run_it_twice(
        pool, tmp_path):
    """Every run of a process holds the process's lease, so a second message for a
    run the process is running (the reaper's, one back from a lost worker) must
    be dropped by the process itself, not run beside the first."""
    from flowforge.service.pool import TASK_NAME, celery_app

    worker = pool.start(concurrency=4)
    pool.wait_ready(worker)
    log = tmp_path / "steps.log"
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(3, 0.5, log), storage=storage, queue=pool.queue)
        await wait_for(storage, run_id, lambda row: row["status"] == "running")
        for _ in range(2):
            celery_app().send_task(TASK_NAME, args=[run_id, pool.database], queue=pool.queue)
        row = await wait_for(storage, run_id, ended, timeout=60)
    finally:
        await storage.close()
    assert row["status"] == "succeeded"
    ends = [line.split()[1] for line in log.read_text().splitlines() if line.startswith("end")]
    assert sorted(ends) == ["0", "1", "2"], ends


async def test_a_worker_process_that_dies_is_started_again(pool, tmp_path):
    """`--processes 2`: a process killed (OOM, kill -9) is replaced by the
    `flowforge worker` that started it, and runs go on."""
    import os
    import signal
    from pathlib import Path

    worker = pool.start(concurrency=2, processes=2)
    pool.wait_ready(worker, processes=2)
    children = Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()
    assert len(children) == 2
    os.kill(int(children[0]), signal.SIGKILL)
    pool.wait_ready(worker, processes=3)              # a third process said it is ready
    now = Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()
    assert len(now) == 2 and children[0] not in now
    lines = await _run_all(pool, tmp_path, 2)
    assert {line[3] for line in lines} <= set(now)
