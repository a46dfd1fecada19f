"""Throughput of the worker pool (runs/s, latency p50/p99 from enqueue to end) for
1, 2 and 4 worker processes against the in-process engine, the same runs: a
5-block chain whose blocks sleep 20 ms, every run recorded in SQLite.

    .venv/bin/python bench/workers.py [--runs 60]

A worker process runs one run at a time (Celery's prefork pool, each run in its
own event loop), so the pool's figure is bounded by processes x 1/run-time;
the in-process engine runs them all concurrently in one loop.  What the pool
buys is not speed on one machine but runs that survive crashes and spread over
machines (bench/chaos.py measures that).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from _pool import Workers, chain, pct, redis_server

import flowforge  # noqa: E402  (bench/_pool puts src on the path)
from flowforge.service.queue import celery_app, enqueue  # noqa: E402
from flowforge.storage import storage_from_url  # noqa: E402


async def _wait_all(storage, run_ids: list[str], started: dict[str, float]) -> dict[str, float]:
    ended: dict[str, float] = {}
    while len(ended) < len(run_ids):
        for run_id in run_ids:
            if run_id in ended:
                continue
            row = await storage.get_run(run_id)
            if row and row["status"] in ("succeeded", "failed", "cancelled"):
                ended[run_id] = (row.get("finished_at") or time.time()) - started[run_id]
        await asyncio.sleep(0.05)
    return ended


async def pool_figure(folder: Path, broker: str, processes: int, runs: int) -> dict:
    database = f"sqlite:///{folder / f'pool{processes}.db'}"
    queue = f"bench-{uuid.uuid4().hex[:6]}"
    workers = Workers(folder, broker, database, queue)
    workers.start(concurrency=processes)
    workers.wait_ready()
    storage = storage_from_url(database)
    await storage.open()
    try:
        began = time.time()
        started: dict[str, float] = {}
        ids = []
        for _ in range(runs):
            started_at = time.time()
            run_id = await enqueue(chain(5, 0.02), storage=storage, queue=queue, broker=broker)
            started[run_id] = started_at
            ids.append(run_id)
        latencies = await _wait_all(storage, ids, started)
        took = max(started[r] + latencies[r] for r in ids) - began
    finally:
        await storage.close()
        workers.stop()
    values = list(latencies.values())
    return {"engine": f"pool x{processes}", "runs": runs,
            "runs_per_s": round(runs / took, 1),
            "latency_p50_ms": round(statistics.median(values) * 1000, 1),
            "latency_p99_ms": round(pct(values, 0.99) * 1000, 1)}


async def in_process_figure(folder: Path, runs: int) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_plugin", folder / "bench_plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    storage = storage_from_url(f"sqlite:///{folder / 'inproc.db'}")
    await storage.open()
    try:
        compiled = flowforge.load(chain(5, 0.02))
        began = time.time()

        async def one() -> float:
            start = time.time()
            await flowforge.run(compiled, {}, storage=storage)
            return time.time() - start

        values = await asyncio.gather(*(one() for _ in range(runs)))
        took = time.time() - began
    finally:
        await storage.close()
    return {"engine": "in-process", "runs": runs, "runs_per_s": round(runs / took, 1),
            "latency_p50_ms": round(statistics.median(values) * 1000, 1),
            "latency_p99_ms": round(pct(list(values), 0.99) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, redis_server() as redis:
        folder = Path(name)
        celery_app.cache_clear()
        rows = []
        for processes in (1, 2, 4):
            rows.append(asyncio.run(pool_figure(folder, redis.url, processes, args.runs)))
            print(json.dumps(rows[-1]), flush=True)
        rows.append(asyncio.run(in_process_figure(folder, args.runs)))
        print(json.dumps(rows[-1]), flush=True)
        base = rows[0]["runs_per_s"]
        print(json.dumps({"scaling_2_over_1": round(rows[1]["runs_per_s"] / base, 2),
                          "scaling_4_over_1": round(rows[2]["runs_per_s"] / base, 2),
                          "in_process_over_pool4": round(rows[3]["runs_per_s"] /
                                                         rows[2]["runs_per_s"], 2)}))


if __name__ == "__main__":
    main()
