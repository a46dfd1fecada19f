"""Throughput of the worker pool (runs/s, latency p50/p99 from enqueue to end) for
1, 2 and 4 worker processes, each running 1 or --concurrency runs at once
(`flowforge worker --processes P --concurrency C`), against the in-process
engine, the same runs: a 5-block chain whose blocks sleep 20 ms, every run
recorded in SQLite.

    .venv/bin/python bench/workers.py [--runs 60] [--concurrency 16] [--database postgres]
        [--shapes 4x16,2x64] [--repeat 3]

Each pool is measured three ways (`pool_figure`): runs enqueued while it
runs, and two drains of runs enqueued first: `drain` with the workers ready
before the runs are released to them, and `drain_with_startup` (the figure
this bench printed before 2026-11-26) with the workers started after.

With one run at a time per process the pool's figure is bounded by processes x
1/run-time; with C runs at once per process (one event loop each, as the
in-process engine) it is bounded by the database and the broker, and still by
P x C / run-time: 4 x 16 drains at most 640 of these 100 ms runs a second,
while the in-process engine runs all --runs at once (4 x 64 leaves the bound
above 2,500).  What the
pool buys is not speed on one machine but runs that survive crashes and spread
over machines (bench/chaos.py measures that).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _pool import Workers, chain, pct, redis_server

import flowforge  # noqa: E402  (bench/_pool puts src on the path)
from flowforge.service.pool import celery_app, enqueue  # noqa: E402
from flowforge.storage import storage_from_url  # noqa: E402


async def _wait_all(storage, run_ids: list[str], started: dict[str, float]) -> dict[str, float]:
    """Enqueue-to-end latency of every run, watched with one query per tick (a
    query per run per tick took a core of its own from the workers measured)."""
    ended: dict[str, float] = {}
    wanted = set(run_ids)
    while len(ended) < len(run_ids):
        for row in await storage.list_runs(limit=len(run_ids) + 10):
            run_id = row["run_id"]
            if run_id in wanted and run_id not in ended and \
                    row["status"] in ("succeeded", "failed", "cancelled"):
                ended[run_id] = (row.get("finished_at") or time.time()) - started[run_id]
        await asyncio.sleep(0.1)
    return ended


#: The drain's runs are queued on `PARKED + queue`, a queue no worker reads, and its
#: lists renamed to the workers' queue at the release.  Enqueued on the workers' own
#: queue and moved aside, they were runs of that queue nowhere in it: once they had
#: waited the bench's lease (3 s; enqueueing 200 runs on PostgreSQL and starting 4
#: workers takes longer), the workers' reapers sent them again as lost messages, and
#: some ran before the release (24 of 200 in one try, 2026-11-26).
PARKED = "parked-"


def _parked(broker: str, queue: str) -> list[str]:
    """The workers' queue's lists (one per priority step) that wait under
    `PARKED + queue`, their messages untouched."""
    import redis

    client = redis.Redis.from_url(broker)
    return [key for key in [queue, *(f"{queue}\x06\x16{n}" for n in (3, 6, 9))]
            if client.exists(f"{PARKED}{key}")]


def _release(broker: str, keys: list[str]) -> float:
    """Put the parked lists back at once (one transaction): when that was."""
    import redis

    with redis.Redis.from_url(broker).pipeline(transaction=True) as pipe:
        for key in keys:
            pipe.rename(f"{PARKED}{key}", key)
        pipe.execute()
    return time.time()


async def _span(storage, run_ids: list[str]) -> tuple[float, float]:
    """The first `run_started` and the last `run_finished` of the runs."""
    first, last = float("inf"), 0.0
    for run_id in run_ids:
        for event in await storage.get_events(run_id):
            if event["type"] == "run_started":
                first = min(first, event["time"])
            elif event["type"] == "run_finished":
                last = max(last, event["time"])
    return first, last


async def pool_figure(folder: Path, broker: str, processes: int, runs: int,
                      concurrency: int = 1, database: str | None = None) -> dict:
    """Three figures.  *live*: runs enqueued while the workers run (runs/s from
    the first enqueue to the last end, and latency from enqueue to end: the
    client's own enqueue rate bounds it).  *drain*: what the workers alone
    sustain: the runs enqueued, parked aside (`PARKED`) while the workers start
    and say they are ready on the empty queue, then released at once (runs/s
    from the release to the last run's end).  *drain with start-up* (the old
    drain figure): the runs enqueued, then the workers started (runs/s from
    the first run's start to the last one's end): its window also holds the
    start-up of the worker processes not ready yet when the first one started
    runs (~0.7 s of CPU each, on the same cores)."""
    database = database or f"sqlite:///{folder / f'pool{processes}x{concurrency}.db'}"
    storage = storage_from_url(database)
    await storage.open()

    async def enqueue_all(queue: str) -> list[str]:
        return [await enqueue(chain(5, 0.02), storage=storage, queue=queue, broker=broker)
                for _ in range(runs)]

    try:
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        workers = Workers(folder / f"p{processes}x{concurrency}", broker, database, queue)
        workers.start(concurrency=concurrency, processes=processes)
        workers.wait_ready()
        try:
            began = time.time()
            started: dict[str, float] = {}
            ids = []
            for _ in range(runs):
                started_at = time.time()
                run_id = await enqueue(chain(5, 0.02), storage=storage, queue=queue,
                                       broker=broker)
                started[run_id] = started_at
                ids.append(run_id)
            latencies = await _wait_all(storage, ids, started)
            took = max(started[r] + latencies[r] for r in ids) - began
        finally:
            workers.stop()
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        drained = await enqueue_all(f"{PARKED}{queue}")
        parked = _parked(broker, queue)
        workers = Workers(folder / f"p{processes}x{concurrency}", broker, database, queue)
        workers.start(concurrency=concurrency, processes=processes)
        try:
            workers.wait_ready()
            released = _release(broker, parked)
            await _wait_all(storage, drained, {r: 0.0 for r in drained})
        finally:
            workers.stop()
        first_drained, last_drained = await _span(storage, drained)
        drain = runs / (last_drained - released)
        queue = f"bench-{uuid.uuid4().hex[:6]}"
        cold = await enqueue_all(queue)
        workers = Workers(folder / f"p{processes}x{concurrency}", broker, database, queue)
        workers.start(concurrency=concurrency, processes=processes)
        try:
            await _wait_all(storage, cold, {r: 0.0 for r in cold})
        finally:
            workers.stop()
        first, last = await _span(storage, cold)
    finally:
        await storage.close()
    values = list(latencies.values())
    return {"engine": f"pool {processes} process(es) x {concurrency} at once", "runs": runs,
            "runs_per_s": round(runs / took, 1),
            "latency_p50_ms": round(statistics.median(values) * 1000, 1),
            "latency_p99_ms": round(pct(values, 0.99) * 1000, 1),
            "drain_runs_per_s": round(drain, 1),
            # < 0: a run started before the release (the figure would not be a drain)
            "drain_first_start_s": round(first_drained - released, 3),
            "drain_with_startup_runs_per_s": round(runs / (last - first), 1)}


async def in_process_figure(folder: Path, runs: int, database: str | None = None) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_plugin", folder / "bench_plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    storage = storage_from_url(database or f"sqlite:///{folder / 'inproc.db'}")
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


def _shapes(text: str, concurrency: int) -> list[tuple[int, int]]:
    """`4x16,2x64` -> [(4, 16), (2, 64)]; the default: 1, 2, 4 processes x 1 and x C."""
    if not text:
        return [(p, c) for c in (1, concurrency) for p in (1, 2, 4)]
    shapes = []
    for part in text.split(","):
        processes, _, at_once = part.strip().partition("x")
        if not (processes.isdigit() and at_once.isdigit()):
            raise SystemExit(f"--shapes {text!r}: write PROCESSESxAT_ONCE, e.g. 4x16,2x64")
        shapes.append((int(processes), int(at_once)))
    return shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=16,
                        help="Runs at once per process for the second series.")
    parser.add_argument("--shapes", default="", help="Only these pools, e.g. 4x16,2x64 "
                        "(processes x runs at once each); default 1, 2, 4 x 1 and x "
                        "--concurrency.")
    parser.add_argument("--repeat", type=int, default=1, help="Measure everything this many "
                        "times, each time the pools then the in-process engine; the medians "
                        "are printed, and each ratio is the median of the ratios of one time.")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite",
                        help="The run database: a SQLite file, or a throwaway PostgreSQL "
                             "(Debian's, a schema per series).")
    args = parser.parse_args()
    shapes = _shapes(args.shapes, args.concurrency)

    def database() -> Any:
        if args.database == "sqlite":
            return contextlib.nullcontext(None)
        from flowforge.storage.testing import shared_url, temporary_schema
        return temporary_schema(shared_url(), "bench_")

    with tempfile.TemporaryDirectory() as name, redis_server() as redis:
        folder = Path(name)
        celery_app.cache_clear()
        tries: dict[tuple[int, int], list[dict]] = {shape: [] for shape in shapes}
        inproc: list[dict] = []
        for attempt in range(args.repeat):
            for processes, concurrency in shapes:
                where = folder / f"try{attempt}" / f"p{processes}x{concurrency}"
                where.mkdir(parents=True, exist_ok=True)
                with database() as url:
                    tries[processes, concurrency].append(asyncio.run(pool_figure(
                        folder / f"try{attempt}", redis.url, processes, args.runs,
                        concurrency, url)))
            # (the step plugin the workers imported is in each of their folders)
            first = shapes[0]
            with database() as url:
                inproc.append(asyncio.run(in_process_figure(
                    folder / f"try{attempt}" / f"p{first[0]}x{first[1]}", args.runs, url)))
        for shape in shapes:
            print(json.dumps(_median_row(tries[shape])), flush=True)
        print(json.dumps(_median_row(inproc)), flush=True)
        ratios = {}
        for p, c in shapes:
            for figure in ("drain", "drain_with_startup"):
                ratios[f"pool_{p}x{c}_{figure}_over_in_process"] = round(statistics.median(
                    row[f"{figure}_runs_per_s"] / alone["runs_per_s"]
                    for row, alone in zip(tries[p, c], inproc)), 2)
        ratios["best_pool_drain_over_in_process"] = round(statistics.median(
            max(tries[shape][n]["drain_runs_per_s"] for shape in shapes) /
            inproc[n]["runs_per_s"] for n in range(args.repeat)), 2)
        print(json.dumps({"repeats": args.repeat, **ratios}))


def _median_row(rows: list[dict]) -> dict:
    """The median of each figure over the repeats (the first row's other fields)."""
    merged = dict(rows[0])
    for key, value in rows[0].items():
        if isinstance(value, float):
            merged[key] = round(statistics.median(row[key] for row in rows), 1)
    return merged


if __name__ == "__main__":
    main()
