"""CPU a worker process spends per run, draining: the figure bench/workers.py's
throughput follows on a shared machine (CPU, not wall time, so other work on the
cores changes it little).  The runs (a 5-block chain, blocks sleep 20 ms) are
enqueued first, then `flowforge worker --processes P --concurrency C` drains
them; its CPU (every process) less what the same worker spends starting and
idling until ready, over the runs; Redis's CPU likewise.

    .venv/bin/python bench/worker_cpu.py [--runs 300] [--processes 1] [--concurrency 16]
        [--profile /tmp/worker.prof]

`--profile PATH`: cProfile on each worker process's runs' loop (PATH.PID),
and the functions that took the most time printed: the CPU figures are then
the profiler's too, not the worker's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

import psutil
from _pool import Workers, chain, redis_server

from flowforge.service.pool import enqueue  # noqa: E402  (bench/_pool puts src on the path)
from flowforge.storage import storage_from_url  # noqa: E402
from workers import _wait_all  # noqa: E402


def _cpu(workers: Workers) -> float:
    total = 0.0
    for started in workers.processes:
        process = psutil.Process(started.pid)
        for each in [process, *process.children(recursive=True)]:
            times = each.cpu_times()
            total += times.user + times.system
    return total


async def measure(folder: Path, redis, processes: int, concurrency: int, runs: int,
                  profile: str | None = None) -> dict:
    database = f"sqlite:///{folder / 'runs.db'}"
    storage = storage_from_url(database)
    await storage.open()
    try:
        idle = Workers(folder / "idle", redis.url, database, f"idle-{uuid.uuid4().hex[:6]}")
        idle.start(concurrency=concurrency, processes=processes)
        idle.wait_ready()
        time.sleep(1.0)
        starting = _cpu(idle)
        idle.stop()
        queue = f"cpu-{uuid.uuid4().hex[:6]}"
        ids = [await enqueue(chain(5, 0.02), storage=storage, queue=queue, broker=redis.url)
               for _ in range(runs)]
        broker = psutil.Process(redis.process.pid)
        before = sum(broker.cpu_times()[:2])
        workers = Workers(folder / "drain", redis.url, database, queue)
        if profile:
            workers.env["BENCH_PROFILE"] = profile
        workers.start(concurrency=concurrency, processes=processes)
        try:
            await _wait_all(storage, ids, {run_id: 0.0 for run_id in ids})
            spent = _cpu(workers)
        finally:
            workers.stop()
        return {"worker": f"{processes} process(es) x {concurrency} at once", "runs": runs,
                "worker_cpu_ms_per_run": round((spent - starting) * 1000 / runs, 2),
                "startup_cpu_s": round(starting, 2),
                "redis_cpu_ms_per_run": round((sum(broker.cpu_times()[:2]) - before)
                                              * 1000 / runs, 2)}
    finally:
        await storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--profile", default=None, help="cProfile the runs' loop of each "
                        "worker process into PROFILE.PID and print the top of it.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, redis_server() as redis:
        for part in ("idle", "drain"):
            Path(name, part).mkdir()
        print(json.dumps(asyncio.run(measure(Path(name), redis, args.processes,
                                             args.concurrency, args.runs, args.profile))))
    if args.profile:
        import glob
        import pstats

        for path in sorted(glob.glob(f"{args.profile}.*")):
            print(f"--- {path}")
            stats = pstats.Stats(path)
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
