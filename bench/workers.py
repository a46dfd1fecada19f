"""Throughput of the worker pool (runs/s, latency p50/p99 from enqueue to end) for
1, 2 and 4 worker processes, each running 1 or --concurrency runs at once
(`flowforge worker --processes P --concurrency C`), against the in-process
engine, the same runs: a 5-block chain whose blocks sleep 20 ms, every run
recorded in SQLite.

    .venv/bin/python bench/workers.py [--runs 60] [--concurrency 16]

With one run at a time per process the pool's figure is bounded by processes x
1/run-time; with C runs at once per process (one event loop each, as the
in-process engine) it is bounded by the database and the broker.  What the
pool buys is not speed on one machine but runs that survive crashes and spread
over machines (bench/chaos.py measures that).
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


async def pool_figure(folder: Path, broker: str, processes: int, runs: int,
                      concurrency: int = 1) -> dict:
    database = f"sqlite:///{folder / f'pool{processes}x{concurrency}.db'}"
    queue = f"bench-{uuid.uuid4().hex[:6]}"
    workers = Workers(folder / f"p{processes}x{concurrency}", broker, database, queue)
    workers.start(concurrency=concurrency, processes=processes)
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
    return {"engine": f"pool {processes} process(es) x {concurrency} at once", "runs": runs,
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
    parser.add_argument("--concurrency", type=int, default=16,
                        help="Runs at once per process for the second series.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, redis_server() as redis:
        folder = Path(name)
        celery_app.cache_clear()
        rows = {}
        for concurrency in (1, args.concurrency):
            for processes in (1, 2, 4):
                folder.joinpath(f"p{processes}x{concurrency}").mkdir()
                rows[processes, concurrency] = row = asyncio.run(
                    pool_figure(folder, redis.url, processes, args.runs, concurrency))
                print(json.dumps(row), flush=True)
        # (the step plugin the workers imported is in each of their folders)
        inproc = asyncio.run(in_process_figure(folder / "p1x1", args.runs))
        print(json.dumps(inproc), flush=True)
        c = args.concurrency
        print(json.dumps({
            "scaling_4_over_1_one_at_once": round(rows[4, 1]["runs_per_s"] /
                                                  rows[1, 1]["runs_per_s"], 2),
            f"one_process_{c}_at_once_over_1": round(rows[1, c]["runs_per_s"] /
                                                     rows[1, 1]["runs_per_s"], 2),
            f"in_process_over_best_pool": round(inproc["runs_per_s"] / max(
                row["runs_per_s"] for row in rows.values()), 2)}))


if __name__ == "__main__":
    main()
