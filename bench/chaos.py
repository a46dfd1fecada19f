"""Crash durability of the worker pool: workers killed with SIGKILL (a lost
machine) at random moments while runs go on, then every run is checked.

    .venv/bin/python bench/chaos.py [--runs 200] [--kills 100] [--workers 3] [--blocks 10]
                                    [--sleep 0.5] [--server-restarts 30 --clients 20]
                                    [--redis-restarts 3] [--distinct-hosts] [--lease 3]

Each run is a chain of `--blocks` blocks that sleep `--sleep` s and append to the
run's own side-effect log (`start`/`end`, with the idempotency key they were
given).  While the runs go on, a random worker is killed (its whole process
group: parent and pool) every `--every` seconds and started again at once.
At the end, for every run:
  lost      the run does not exist or did not end
  stuck     the run is not `succeeded` (every block of it can succeed)
  re-run    a block started after its success was stored (a block that had
            succeeded ran again); told apart from a block that returned but
            whose worker was killed before its success was stored, which is
            in flight and runs again, with its key (`returned but unstored`)
  key       a block that started twice did not get the same key both times
and, from every run's stored events:
  missing      a gap in the run's event numbers
  duplicated   a block that succeeded twice (not counting a resumed run's replay of
               its checkpoints, `resumed: true`), or one event number twice
  out of order an event numbered below the one before it, or any event after the
               run's first `run_finished`
  finished twice  runs with more than one `run_finished`
and, for every run a kill caught running, the takeover time: from the kill to
the run's next stored event (another worker resumed it).  The lease is
`--lease` (FLOWFORGE_LEASE_SECONDS, 3 s by default here).  On one host a dead
worker's lease is taken at once; with `--distinct-hosts` every worker (and every
one started after a kill) names a host of its own (FLOWFORGE_HOST), as on
separate machines, so a takeover waits for the lease to lapse: the target is
p99 <= lease + 10 s.

With `--redis-restarts K`, the broker (Redis, no persistence) is killed with
SIGKILL K times at random moments (every `--redis-every` s on average), stays
down `--redis-down` s and starts again empty on the same port: every message
it held is lost, and the workers must reconnect and the reapers send again
what was lost.  The workers' exits are counted (`workers_exited`: a worker
that died by itself, not by the bench's kill).

With `--server-restarts K`, a `flowforge serve --workers celery` process serves
the runs' events while the workers run them, and `--clients` SSE clients follow
every run (client i follows runs i, i + N, ... one after another, from the
first event); the server is killed with SIGKILL K times at random moments
(every `--server-every` s on average) and started again on the same port, and
each client reconnects with the `Last-Event-ID` of the last event it got.  For
every run, what its client saw is compared with the stored events:
  twice        events received more than once
  missing      stored events never received
  out of order events received after one with a higher seq
  no terminal  the last event received is not the run's stored `run_finished`
and the reconnect gap (the connection breaking -> the next one answering) is
reported; it includes starting the new server process.

With `--store-outages`, the database goes away instead of the workers (issue
24): PostgreSQL under a worker pool is stopped `--pg-restarts` times (`pg_ctl
-m immediate stop`, `--down` s each), and SQLite under `--cli-runs` `flowforge
run` processes sits on a disk that is full for `--full` s; every run's events
are counted missing, duplicated and out of order, runs with two `run_finished`,
and side effects repeated after their success was stored (`bench/_outages.py`):

    .venv/bin/python bench/chaos.py --store-outages [--runs 12 --blocks 8 --sleep 1]

With `--all-faults`, all of it at once (`bench/_faults.py`): a pool on two
hostnames runs `--runs` chains on PostgreSQL while workers are killed,
PostgreSQL is stopped `--pg-restarts` times for `--down` s (longer than the
lease) and Redis restarted `--redis-restarts` times; then SQLite's disk is
full for `--full` s under `--cli-runs` CLI runs.  Prints the JSON line, then
the table of bench/RESULTS.md:

    .venv/bin/python bench/chaos.py --all-faults --runs 150 --blocks 6 --workers 4
        --concurrency 4 --kills 40 --every 3 --pg-restarts 3 --down 12 --lease 8
        --redis-restarts 3 --cli-runs 4 --full 4

With `--stream-cuts N` (issue 41, `bench/_stream_cuts.py`), N runs of an
`llm`/`agent` block stream from a loopback fake OpenAI-compatible model
(`bench/_fake_openai.py`) that closes the connection mid-answer in a fraction
`--cut-rate` of its answers, with a second fake as the fallback model, then N
runs with no fallback: runs that succeeded whole, succeeded with partial text
(target 0), failed with a located "the stream was cut", `llm_restart` events
and cuts injected.  Prints the JSON line, then the table of bench/RESULTS.md:

    .venv/bin/python bench/chaos.py --stream-cuts 200 --cut-rate 0.3

With `--approvals N` (issue 41, `bench/_approvals.py`), a `flowforge serve`
process running runs in-process starts N runs that stop at an approval; an
SSE and a WebSocket client follow each from its first event to `run_waiting`,
connect again after that seq and wait while the bench approves or rejects it
through the API (and, with `--server-restarts K`, kills the server and starts
it again K times meanwhile): events missing, twice or out of order per
follower, `block_skipped` before the decision, runs without exactly one
`run_waiting` and one `run_finished` (all targets 0), and the decision ->
`run_finished` latency that the followers saw:

    .venv/bin/python bench/chaos.py --approvals 40 [--server-restarts 3 --server-every 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from _pool import Workers, chain, pct, redis_server, restart_redis_at_random
from _sse import Followed, ServerProcess, check_events, follow_run

from flowforge.service.pool import celery_app, enqueue  # noqa: E402
from flowforge.service.users import create_user  # noqa: E402
from flowforge.storage import storage_from_url  # noqa: E402


async def chaos(folder: Path, redis: Any, args: argparse.Namespace) -> dict:
    broker = redis.url
    database = f"sqlite:///{folder / 'chaos.db'}"
    queue = f"chaos-{uuid.uuid4().hex[:6]}"
    workers = Workers(folder, broker, database, queue, lease=args.lease)
    hosts = iter(f"host-{n}" for n in range(10**6))

    def start() -> Any:
        return workers.start(concurrency=args.concurrency,
                             host=next(hosts) if args.distinct_hosts else None)

    pool = [start() for _ in range(args.workers)]
    workers.wait_ready()
    storage = storage_from_url(database)
    await storage.open()
    rng = random.Random(args.seed)
    runs: dict[str, Path] = {}
    kills: list[tuple[float, int]] = []
    server = ServerProcess(folder, workers.env, database) if args.server_restarts else None
    sse: dict = {}
    try:
        user, key = await create_user(storage, "chaos", "user")
        if server is not None:
            await server.start()
        for index in range(args.runs):
            log = folder / f"run{index}.log"
            run_id = await enqueue(chain(args.blocks, args.sleep, str(log), workflow_id="chaos"),
                                   user=user["user_id"], storage=storage, queue=queue,
                                   broker=broker)
            runs[run_id] = log
        ids = list(runs)

        async def all_ended() -> bool:
            rows = [await storage.get_run(r) for r in ids]
            return all(row and row["status"] in ("succeeded", "failed", "cancelled")
                       for row in rows)

        async def kill_workers() -> None:
            for _ in range(args.kills):
                await asyncio.sleep(rng.uniform(0.5, 2 * args.every - 0.5))
                if await all_ended():
                    return
                victim = rng.randrange(len(pool))
                kills.append((time.time(), pool[victim].pid))
                killed.add(pool[victim].pid)
                workers.kill(pool[victim])
                pool[victim] = start()

        killed: set[int] = set()
        restarts: list[float] = []
        tasks = [asyncio.create_task(kill_workers()), asyncio.create_task(
            restart_redis_at_random(redis, args, rng, all_ended, restarts))]
        if server is not None:
            tasks.append(asyncio.create_task(_restart_server(server, rng, args, all_ended,
                                                             sse)))
            tasks.append(asyncio.create_task(_follow_all(server, key, ids, args, sse)))
        deadline = time.monotonic() + args.timeout
        _done, late = await asyncio.wait(tasks, timeout=args.timeout)
        for task in late:                  # a client still waiting: its run did not end
            task.cancel()
        for task in _done:
            task.result()                  # a bench that broke says so
        while time.monotonic() < deadline and not await all_ended():
            await asyncio.sleep(0.5)
        report = await _check(storage, runs, kills, args.blocks, args.sleep)
        report.pop("takeover_list")
        report.update(await _check_streams(storage, list(runs)))
        report["workers_exited"] = sum(1 for process in workers.processes
                                       if process.poll() is not None
                                       and process.pid not in killed)
        if server is not None:
            report.update(await _check_sse(storage, sse))
    finally:
        await storage.close()
        if server is not None:
            server.stop()
        workers.stop()
    report.update({"runs": args.runs, "blocks": args.blocks, "block_sleep_s": args.sleep,
                   "workers": args.workers, "concurrency": args.concurrency,
                   "kills": len(kills), "redis_restarts": len(restarts),
                   "distinct_hosts": args.distinct_hosts, "lease_s": args.lease,
                   "takeover_target_s": args.lease + 10})
    return report


async def _check_streams(storage, run_ids: list[str]) -> dict:
    """Each run's stored events, as a follower reads them: numbered without a gap
    or a repeat, nothing after `run_finished`, one `run_finished`, no block that
    succeeded twice."""
    missing = duplicated = out_of_order = finished_twice = 0
    for run_id in run_ids:
        events = await storage.get_events(run_id)
        seqs = [event["seq"] for event in events]
        missing += len(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        duplicated += len(seqs) - len(set(seqs))
        succeeded = [(event.get("scope"), event.get("block_id")) for event in events
                     if event["type"] == "block_succeeded" and not event.get("resumed")]
        duplicated += len(succeeded) - len(set(succeeded))
        out_of_order += sum(1 for a, b in zip(seqs, seqs[1:]) if b <= a)
        finishes = [n for n, event in enumerate(events) if event["type"] == "run_finished"]
        finished_twice += len(finishes) > 1
        if finishes:                 # anything after the first end
            out_of_order += len(events) - 1 - finishes[0]
    return {"events_missing": missing, "events_duplicated": duplicated,
            "events_out_of_order": out_of_order, "runs_finished_twice": finished_twice}


async def _restart_server(server: ServerProcess, rng: random.Random,
                          args: argparse.Namespace, all_ended, sse: dict) -> None:
    """kill -9 the server at random moments and start it again at once."""
    sse["restarts"], sse["boot_s"] = 0, []
    for _ in range(args.server_restarts):
        await asyncio.sleep(rng.uniform(0.5, 2 * args.server_every - 0.5))
        if await all_ended():
            return
        server.kill()
        sse["restarts"] += 1
        sse["boot_s"].append(await server.start())


async def _follow_all(server: ServerProcess, key: str, ids: list[str],
                      args: argparse.Namespace, sse: dict) -> None:
    """N clients, each following its share of the runs one after another."""
    followed = sse.setdefault("followed", {})

    async def client(index: int) -> None:
        timeout = httpx.Timeout(10.0, read=60.0)        # the server pings every 15 s
        async with httpx.AsyncClient(base_url=server.url, timeout=timeout,
                                     headers={"Authorization": f"Bearer {key}"}) as http:
            for run_id in ids[index::args.clients]:
                followed[run_id] = Followed()     # kept if the bench gives up on it
                await follow_run(http, run_id, followed=followed[run_id])

    await asyncio.gather(*(client(i) for i in range(min(args.clients, len(ids)))))


async def _check_sse(storage, sse: dict) -> dict:
    totals = {"twice": 0, "missing": 0, "out_of_order": 0, "unknown": 0, "no_terminal": 0}
    bad: dict[str, dict] = {}
    gaps: list[float] = []
    reconnected = 0
    for run_id, followed in sse["followed"].items():
        found = check_events(followed.events, await storage.get_events(run_id))
        for name, count in found.items():
            totals[name] += count
        if any(found.values()) or followed.error:
            bad[run_id] = {**found, "error": followed.error}
        gaps += followed.gaps
        reconnected += bool(followed.gaps)
    boots = sse.get("boot_s") or []
    return {"server_restarts": sse.get("restarts", 0),
            "sse_runs_followed": len(sse["followed"]),
            "sse_runs_reconnected": reconnected, "sse_reconnects": len(gaps),
            **{f"sse_{name}": count for name, count in totals.items()},
            "sse_bad_runs": bad,
            "sse_reconnect_gap_p50_s": round(pct(gaps, 0.5), 2) if gaps else None,
            "sse_reconnect_gap_p99_s": round(pct(gaps, 0.99), 2) if gaps else None,
            "server_boot_p50_s": round(pct(boots, 0.5), 2) if boots else None}


async def _check(storage, runs: dict[str, Path], kills: list[tuple[float, int]],
                 blocks: int, sleep: float) -> dict:
    lost = stuck = rerun = bad_keys = reruns_in_flight = unstored = 0
    details: list[dict] = []
    takeovers: list[tuple[float, float, float, str]] = []   # kill, resumed, seconds, run
    for run_id, log in runs.items():
        row = await storage.get_run(run_id)
        if row is None or row["status"] not in ("succeeded", "failed", "cancelled"):
            lost += 1
            continue
        if row["status"] != "succeeded":
            stuck += 1
        lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
        events = await storage.get_events(run_id)
        for n in range(blocks):
            ends = [line for line in lines if line[0] == "end" and line[1] == str(n)]
            starts = [line for line in lines if line[0] == "start" and line[1] == str(n)]
            stored = [e for e in events if e.get("block_id") == f"s{n}"]
            checkpointed = min((e["time"] for e in stored if e["type"] == "block_succeeded"),
                               default=None)
            again = [line for line in starts
                     if checkpointed is not None and float(line[2]) > checkpointed]
            if again:           # started after its success was stored: ran again
                rerun += 1
            elif len(ends) > 1:  # returned, but killed before its success was stored
                unstored += 1
            if len(starts) > 1:
                reruns_in_flight += 1
                if len({line[4] if len(line) > 4 else "" for line in starts}) != 1:
                    bad_keys += 1
            if (again or len(ends) > 1) and len(details) < 10:
                details.append({"run_id": run_id, "block": n, "log": [
                    " ".join(line) for line in lines if line[1] == str(n)], "events": [
                    (e["type"], e["time"]) for e in stored], "kills": [
                    at for at, _pid in kills if stored and stored[0]["time"] - 1 <= at
                    <= stored[-1]["time"] + 1]})
        started = False
        for previous, current in zip(events, events[1:]):
            started = started or previous["type"] == "run_started"
            if not started or current["time"] - previous["time"] <= sleep + 1.0:
                continue
            # a running run stood still: its worker was killed in the gap; the event
            # that ends the gap is another worker resuming it
            inside = [at for at, _pid in kills if previous["time"] <= at < current["time"]]
            if inside:
                takeovers.append((inside[0], current["time"], current["time"] - inside[0],
                                  run_id))
    seconds = [taken for _, _, taken, _ in takeovers]
    return {"lost": lost, "stuck": stuck, "succeeded_blocks_run_again": rerun,
            "in_flight_blocks_run_again": reruns_in_flight, "keys_changed": bad_keys,
            "returned_but_unstored_blocks_run_again": unstored, "details": details,
            "takeovers": len(takeovers), "takeover_list": takeovers,
            "takeover_p50_s": round(pct(seconds, 0.5), 2) if seconds else None,
            "takeover_p99_s": round(pct(seconds, 0.99), 2) if seconds else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2, help="Runs at once per worker "
                        "(one process each).")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--every", type=float, default=2.0, help="Mean seconds between kills.")
    parser.add_argument("--sleep", type=float, default=0.5, help="Seconds each block sleeps.")
    parser.add_argument("--server-restarts", type=int, default=0,
                        help="kill -9 and restart the server this many times (0: no server).")
    parser.add_argument("--server-every", type=float, default=8.0,
                        help="Mean seconds between server kills.")
    parser.add_argument("--clients", type=int, default=20, help="SSE clients following runs.")
    parser.add_argument("--redis-restarts", type=int, default=0,
                        help="kill -9 Redis and start it again empty this many times.")
    parser.add_argument("--redis-every", type=float, default=10.0,
                        help="Mean seconds between Redis restarts.")
    parser.add_argument("--redis-down", type=float, default=1.0,
                        help="Seconds Redis stays down at each restart.")
    parser.add_argument("--distinct-hosts", action="store_true",
                        help="Every worker names a host of its own (takeovers across hosts).")
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true",
                        help="Keep the folder (database, logs) and say where.")
    parser.add_argument("--store-outages", action="store_true",
                        help="Stop the database instead of killing workers (issue 24).")
    parser.add_argument("--all-faults", action="store_true",
                        help="Worker kills, PostgreSQL and Redis restarts in one pool run on "
                             "two hostnames, then SQLite's disk full (bench/_faults.py).")
    parser.add_argument("--pg-every", type=float, default=15.0,
                        help="Mean seconds between PostgreSQL stops (--all-faults).")
    parser.add_argument("--pg-restarts", type=int, default=3)
    parser.add_argument("--down", type=float, default=3.0, help="Seconds PostgreSQL is down.")
    parser.add_argument("--full", type=float, default=3.0, help="Seconds the disk is full.")
    parser.add_argument("--cli-runs", type=int, default=4)
    parser.add_argument("--retry", type=float, default=30.0,
                        help="FLOWFORGE_STORE_RETRY_SECONDS of the SQLite runs.")
    parser.add_argument("--stream-cuts", type=int, default=0, metavar="N",
                        help="N runs on a fake model that closes the connection mid-answer, "
                             "with a fallback, then N without (bench/_stream_cuts.py).")
    parser.add_argument("--cut-rate", type=float, default=0.3,
                        help="Fraction of the fake model's answers cut (--stream-cuts).")
    parser.add_argument("--fallback-cut-rate", type=float, default=None,
                        help="The same for the fallback model (default: --cut-rate).")
    parser.add_argument("--approvals", type=int, default=0, metavar="N",
                        help="N runs waiting on an approval, followed over SSE and WebSocket "
                             "across the decision (bench/_approvals.py).")
    parser.add_argument("--decide-within", type=float, default=10.0,
                        help="Each approval is decided at a random moment within this many "
                             "seconds of both its followers waiting (--approvals).")
    parser.add_argument("--parallel", type=int, default=8,
                        help="Runs started at once (--stream-cuts, --approvals).")
    args = parser.parse_args()
    if args.stream_cuts:
        import _stream_cuts
        if args.fallback_cut_rate is None:
            args.fallback_cut_rate = args.cut_rate
        report = _stream_cuts.main(args)
        print(json.dumps(report))
        print(_stream_cuts.table(report))
        return
    if args.approvals:
        import _approvals
        report = _approvals.main(args)
        print(json.dumps(report))
        print(_approvals.table(report))
        return
    if args.all_faults:
        import _faults
        with redis_server() as redis:
            celery_app.cache_clear()
            report = _faults.main(args, redis, _check, _check_streams)
        print(json.dumps(report))
        print(_faults.table(report))
        return
    if args.store_outages:
        import _outages
        with redis_server() as redis:
            celery_app.cache_clear()
            print(json.dumps(_outages.main(args, redis.url)))
        return
    with (contextlib.nullcontext(tempfile.mkdtemp(prefix="chaos-")) if args.keep
          else tempfile.TemporaryDirectory()) as name, redis_server() as redis:
        if args.keep:
            print(f"keeping {name}", file=sys.stderr)
        celery_app.cache_clear()
        print(json.dumps(asyncio.run(chaos(Path(name), redis, args))))


if __name__ == "__main__":
    main()
