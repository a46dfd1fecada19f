"""bench/chaos.py --all-faults: every fault an operator meets, in one run
(issue 24), then every stored record checked.

A worker pool on two hostnames (`host-a`, `host-b`: FLOWFORGE_HOST; a worker
killed is started again on its own host) runs `--runs` chains on a throwaway
PostgreSQL (fsync on) while, at the same time and at random moments:
  - workers are killed with SIGKILL (their whole process group) every
    `--every` s on average and started again at once (`--kills` at most);
  - PostgreSQL is stopped the hard way (`pg_ctl -m immediate stop`)
    `--pg-restarts` times, down `--down` s each (longer than `--lease`: the
    holders' leases lapse while it is down, and runs are taken over as soon
    as it is back);
  - Redis (no persistence) is killed `--redis-restarts` times, down
    `--redis-down` s, back empty;
  - a worker that exits by itself is started again (a supervisor's job) and
    counted.
Then, in the same invocation, SQLite on a small tmpfs is filled to the last
byte for `--full` s under `--cli-runs` `flowforge run` processes
(`_outages.sqlite_disk_full`).

Counted (targets 0): stored events missing / duplicated / out of order (a
gap, a seq twice, an event after `run_finished`, a block started before its
predecessor's success was stored), runs with more than one `run_finished`,
succeeded side effects repeated (a block's `start` logged after its success
was stored); and, told apart, blocks in flight re-run (a block whose success
was never stored, started again by the run's next holder: at least once is
inherent there) and how many of those the record reports
(`block_cancelled` with `runs_again`).  Takeover latency: a kill -> the
run's next stored event (another worker resumed it), over runs whose gap
did not overlap a PostgreSQL outage; those that did are counted apart, from
the database's return (nothing can be taken over while it is down); target
p99 <= lease + 10 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import _outages
from _pool import Workers, chain, pct, restart_redis_at_random

from flowforge.service.pool import enqueue
from flowforge.storage import storage_from_url, testing

HOSTS = ("host-a", "host-b")
ENDED = ("succeeded", "failed", "cancelled")


async def _pool_under_faults(folder: Path, redis: Any, args: Any, check: Callable,
                             check_streams: Callable) -> dict:
    server = {"pg": testing.start(durable=True)}
    url = server["pg"].url
    queue = f"faults-{uuid.uuid4().hex[:6]}"
    workers = Workers(folder, redis.url, url, queue, lease=args.lease)
    hosts: dict[int, str] = {}

    def start(host: str) -> subprocess.Popen:
        process = workers.start(concurrency=args.concurrency, host=host)
        hosts[process.pid] = host
        return process

    pool = [start(HOSTS[n % 2]) for n in range(args.workers)]
    killed: set[int] = set()
    kills: list[tuple[float, int]] = []
    outages: list[tuple[float, float]] = []
    redis_restarts: list[float] = []
    exited: list[int] = []
    rng = random.Random(args.seed)
    storage = storage_from_url(url)
    try:
        workers.wait_ready()
        await storage.open()
        runs: dict[str, Path] = {}
        for index in range(args.runs):
            log = folder / f"run{index}.log"
            runs[await enqueue(chain(args.blocks, args.sleep, str(log), workflow_id="chaos"),
                               storage=storage, queue=queue, broker=redis.url)] = log
        ids = list(runs)
        began = time.time()

        async def all_ended() -> bool:
            try:
                rows = [await storage.get_run(run_id) for run_id in ids]
            except Exception:  # noqa: BLE001 - PostgreSQL is down: not ended
                return False
            return all(row is not None and row["status"] in ENDED for row in rows)

        def supervise() -> None:
            """Start again a worker that exited by itself (not killed here)."""
            for index, process in enumerate(pool):
                if process.poll() is not None and process.pid not in killed:
                    exited.append(process.pid)
                    killed.add(process.pid)
                    pool[index] = start(hosts[process.pid])

        async def kill_workers() -> None:
            for _ in range(args.kills):
                await asyncio.sleep(rng.uniform(0.5, 2 * args.every - 0.5))
                supervise()
                if await all_ended():
                    return
                victim = rng.randrange(len(pool))
                process = pool[victim]
                kills.append((time.time(), process.pid))
                killed.add(process.pid)
                workers.kill(process)
                pool[victim] = start(hosts[process.pid])

        async def restart_postgres() -> None:
            for _ in range(args.pg_restarts):
                await asyncio.sleep(rng.uniform(2.0, 2 * args.pg_every - 2.0))
                if await all_ended():
                    return
                down = time.time()
                await asyncio.to_thread(testing.crash, server["pg"])
                await asyncio.sleep(args.down)
                server["pg"] = await asyncio.to_thread(testing.restart, server["pg"])
                outages.append((down, time.time()))

        tasks = [asyncio.create_task(job()) for job in (kill_workers, restart_postgres)] + [
            asyncio.create_task(restart_redis_at_random(redis, args, rng, all_ended,
                                                        redis_restarts))]
        deadline = time.monotonic() + args.timeout
        done, late = await asyncio.wait(tasks, timeout=args.timeout)
        for task in late:
            task.cancel()
        for task in done:
            task.result()                  # a bench that broke says so
        while time.monotonic() < deadline and not await all_ended():
            supervise()
            await asyncio.sleep(0.5)
        wall = time.time() - began
        report = await check(storage, runs, kills, args.blocks, args.sleep)
        report.update(await check_streams(storage, ids))
        report.update(await _order_and_reports(storage, runs, args.blocks))
        report.update(_takeovers(report.pop("takeover_list"), outages, redis_restarts,
                                 args.lease, began))
    finally:
        await storage.close()
        workers.stop()
        testing.stop(server["pg"])
    paused = sum(path.read_text(errors="replace").count("a write to the database failed")
                 for path in folder.glob("worker-*.log"))
    logs = [path.read_text(errors="replace") for path in folder.glob("worker-*.log")]
    fenced = sum(text.count("no longer holds the run's lease") for text in logs)
    # two processes writing one run: storage refused the second's events
    clashes = sum(text.count("are already stored with other content") for text in logs)
    report.update({"runs": args.runs, "blocks": args.blocks, "block_sleep_s": args.sleep,
                   "workers": args.workers, "concurrency": args.concurrency,
                   "hosts": len(HOSTS), "lease_s": args.lease, "wall_s": round(wall, 1),
                   "kills": len(kills), "workers_exited": len(exited),
                   "pg_restarts": len(outages), "pg_down_s": args.down,
                   "redis_restarts": len(redis_restarts), "runs_paused_times": paused,
                   "writes_refused_by_fence": fenced, "writes_clashing": clashes,
                   "takeover_target_s": args.lease + 10})
    return report


async def _order_and_reports(storage: Any, runs: dict[str, Path], blocks: int) -> dict:
    """A block started (stored) before its predecessor's success was stored; the
    re-runs of in-flight blocks the record reports (`runs_again`)."""
    out_of_order = reported = unreported = 0
    for run_id, log in runs.items():
        events = await storage.get_events(run_id)
        out_of_order += _outages.check(events, [], blocks)["out_of_order"]
        lines = _outages._lines(log)
        for n in range(blocks):
            starts = sum(1 for line in lines if line[:2] == ["start", str(n)])
            told = sum(1 for e in events if e["type"] == "block_cancelled"
                       and e.get("block_id") == f"s{n}" and e.get("runs_again"))
            reported += min(told, max(0, starts - 1))
            unreported += max(0, starts - 1 - told)
    return {"blocks_started_before_predecessor_stored": out_of_order,
            "in_flight_reruns_reported": reported, "in_flight_reruns_unreported": unreported}


def _takeovers(takeovers: list[tuple[float, float, float, str]],
               outages: list[tuple[float, float]], redis_restarts: list[float],
               lease: float, began: float) -> dict:
    """p50/p90/p99 of the takeovers whose wait did not overlap an outage; the
    slowest ones past the target, with the faults around them."""
    kept = [(killed, resumed, seconds, run_id) for killed, resumed, seconds, run_id in takeovers
            if not any(down < resumed and killed < up for down, up in outages)]
    clean = [seconds for _, _, seconds, _ in kept]
    out: dict[str, Any] = {"takeovers": len(clean),
                           "takeovers_across_an_outage": len(takeovers) - len(clean)}
    # a takeover across an outage, from when it could start: the database back
    across = [resumed - max([killed] + [up for _, up in outages if up <= resumed])
              for killed, resumed, _, _ in takeovers
              if any(down < resumed and killed < up for down, up in outages)]
    out["takeover_across_an_outage_p50_p99_s"] = \
        [round(pct(across, 0.5), 2), round(pct(across, 0.99), 2)] if across else None
    out["slow_takeovers"] = [
        {"run_id": run_id, "killed_at_s": round(killed - began, 1), "seconds": round(seconds, 1),
         "redis_restarts_inside": sum(1 for at in redis_restarts if killed <= at <= resumed),
         "since_outage_end_s": min((round(killed - up, 1) for _, up in outages if up <= killed),
                                   default=None)}
        for killed, resumed, seconds, run_id in sorted(kept, key=lambda t: -t[2])
        if seconds > lease + 10][:5]
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        out[f"takeover_{name}_s"] = round(pct(clean, q), 2) if clean else None
    out["takeover_max_s"] = round(max(clean), 2) if clean else None
    return out


def main(args: Any, redis: Any, check: Callable, check_streams: Callable) -> dict:
    with (contextlib.nullcontext(tempfile.mkdtemp(prefix="faults-")) if args.keep
          else tempfile.TemporaryDirectory(prefix="faults-")) as name:
        if args.keep:
            print(f"keeping {name} (worker logs, side-effect logs)", file=sys.stderr)
        report = {"postgres_pool": asyncio.run(
            _pool_under_faults(Path(name), redis, args, check, check_streams))}
    with tempfile.TemporaryDirectory(prefix="faults-sqlite-") as name:
        report["sqlite_disk_full"] = _outages.sqlite_disk_full(Path(name), args)
    return report


def table(report: dict) -> str:
    """The figures as bench/RESULTS.md shows them."""
    pg, lite = report["postgres_pool"], report["sqlite_disk_full"]
    rows = [
        ("events missing / duplicated / out of order",
         f"{pg['events_missing']} / {pg['events_duplicated']} / "
         f"{pg['events_out_of_order'] + pg['blocks_started_before_predecessor_stored']}",
         f"{lite.get('missing')} / {lite.get('duplicated')} / {lite.get('out_of_order')}"),
        ("runs with more than one `run_finished`", pg["runs_finished_twice"],
         lite.get("finished_2x")),
        ("succeeded side effects repeated", pg["succeeded_blocks_run_again"],
         lite.get("repeated")),
        ("runs lost / not succeeded", f"{pg['lost']} / {pg['stuck']}",
         f"0 / {lite.get('not_succeeded')}"),
        ("in-flight blocks re-run (reported by `runs_again` / not)",
         f"{pg['in_flight_reruns_reported']} / {pg['in_flight_reruns_unreported']}", "-"),
        ("writes refused by the lease fence (a worker taken over during an outage)",
         pg["writes_refused_by_fence"], "-"),
        ("takeovers: p50 / p90 / p99 / max (target p99 <= "
         f"{pg['takeover_target_s']:g} s)",
         f"{pg['takeovers']}: {pg['takeover_p50_s']} / {pg['takeover_p90_s']} / "
         f"{pg['takeover_p99_s']} / {pg['takeover_max_s']} s "
         f"(+{pg['takeovers_across_an_outage']} across a PostgreSQL outage, from its end: "
         f"p50 / p99 "
         f"{' / '.join(map(str, pg['takeover_across_an_outage_p50_p99_s'] or ['-']))} s)",
         "-"),
        ("faults", f"{pg['kills']} kills, {pg['pg_restarts']} PostgreSQL stops of "
         f"{pg['pg_down_s']:g} s, {pg['redis_restarts']} Redis restarts; "
         f"{pg['workers_exited']} workers exited by themselves",
         f"disk full {lite.get('full_s')} s; {lite.get('runs_paused')} runs paused, "
         f"{lite.get('cut_off_then_resumed')} cut off then resumed"),
    ]
    lines = [f"| check | PostgreSQL pool ({pg['runs']} runs, {pg['hosts']} hosts, "
             f"{pg['wall_s']} s) | SQLite disk full ({lite.get('runs')} CLI runs) |",
             "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)
