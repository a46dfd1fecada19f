"""Crash durability of the worker pool: workers killed with SIGKILL (a lost
machine) at random moments while runs go on, then every run is checked.

    .venv/bin/python bench/chaos.py [--runs 200] [--kills 100] [--workers 3] [--blocks 10]

Each run is a chain of `--blocks` blocks that sleep 0.1 s and append to the
run's own side-effect log (`start`/`end`, with the idempotency key they were
given).  While the runs go on, a random worker is killed (its whole process
group: parent and pool) every `--every` seconds and started again at once.
At the end, for every run:
  lost      the run does not exist or did not end
  stuck     the run is not `succeeded` (every block of it can succeed)
  re-run    a block logged `end` twice (a block that had succeeded ran again)
  key       a block that started twice did not get the same key both times
and, for every run a kill caught running, the takeover time: from the kill to
the run's next stored event (another worker resumed it).  The lease is
FLOWFORGE_LEASE_SECONDS (3 s here): the takeover is bounded by it plus the
reaper's period (2 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

from _pool import Workers, chain, pct, redis_server

from flowforge.service.queue import celery_app, enqueue  # noqa: E402
from flowforge.storage import storage_from_url  # noqa: E402


async def chaos(folder: Path, broker: str, args: argparse.Namespace) -> dict:
    database = f"sqlite:///{folder / 'chaos.db'}"
    queue = f"chaos-{uuid.uuid4().hex[:6]}"
    workers = Workers(folder, broker, database, queue, lease=args.lease)
    pool = [workers.start(concurrency=args.concurrency) for _ in range(args.workers)]
    workers.wait_ready()
    storage = storage_from_url(database)
    await storage.open()
    rng = random.Random(args.seed)
    runs: dict[str, Path] = {}
    kills: list[tuple[float, int]] = []
    try:
        for index in range(args.runs):
            log = folder / f"run{index}.log"
            run_id = await enqueue(chain(args.blocks, 0.1, str(log), workflow_id="chaos"),
                                   storage=storage, queue=queue, broker=broker)
            runs[run_id] = log
        deadline = time.monotonic() + args.timeout
        for _ in range(args.kills):
            await asyncio.sleep(rng.uniform(0.5, 2 * args.every - 0.5))
            rows = [await storage.get_run(r) for r in runs]
            if all(row and row["status"] in ("succeeded", "failed", "cancelled")
                   for row in rows):
                break
            victim = rng.randrange(len(pool))
            kills.append((time.time(), pool[victim].pid))
            workers.kill(pool[victim])
            pool[victim] = workers.start(concurrency=args.concurrency)
        while time.monotonic() < deadline:
            rows = [await storage.get_run(r) for r in runs]
            if all(row and row["status"] in ("succeeded", "failed", "cancelled")
                   for row in rows):
                break
            await asyncio.sleep(0.5)
        report = await _check(storage, runs, kills, args.blocks)
    finally:
        await storage.close()
        workers.stop()
    report.update({"runs": args.runs, "blocks": args.blocks, "workers": args.workers,
                   "kills": len(kills), "lease_s": args.lease})
    return report


async def _check(storage, runs: dict[str, Path], kills: list[tuple[float, int]],
                 blocks: int) -> dict:
    lost = stuck = rerun = bad_keys = reruns_in_flight = 0
    takeovers: list[float] = []
    for run_id, log in runs.items():
        row = await storage.get_run(run_id)
        if row is None or row["status"] not in ("succeeded", "failed", "cancelled"):
            lost += 1
            continue
        if row["status"] != "succeeded":
            stuck += 1
        lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        for n in range(blocks):
            ends = [line for line in lines if line[0] == "end" and line[1] == str(n)]
            starts = [line for line in lines if line[0] == "start" and line[1] == str(n)]
            if len(ends) > 1:
                rerun += 1
            if len(starts) > 1:
                reruns_in_flight += 1
                if len({line[2] for line in starts}) != 1:
                    bad_keys += 1
        events = await storage.get_events(run_id)
        started = False
        for previous, current in zip(events, events[1:]):
            started = started or previous["type"] == "run_started"
            if not started or current["time"] - previous["time"] <= 1.0:
                continue
            # a running run stood still: its worker was killed in the gap; the event
            # that ends the gap is another worker resuming it
            inside = [at for at, _pid in kills if previous["time"] <= at < current["time"]]
            if inside:
                takeovers.append(current["time"] - inside[0])
    return {"lost": lost, "stuck": stuck, "succeeded_blocks_run_again": rerun,
            "in_flight_blocks_run_again": reruns_in_flight, "keys_changed": bad_keys,
            "takeovers": len(takeovers),
            "takeover_p50_s": round(pct(takeovers, 0.5), 2) if takeovers else None,
            "takeover_p99_s": round(pct(takeovers, 0.99), 2) if takeovers else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2, help="Runs at once per worker "
                        "(one process each).")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--every", type=float, default=2.0, help="Mean seconds between kills.")
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, redis_server() as redis:
        celery_app.cache_clear()
        print(json.dumps(asyncio.run(chaos(Path(name), redis.url, args))))


if __name__ == "__main__":
    main()
