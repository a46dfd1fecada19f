"""bench/chaos.py --store-outages: the run's database goes away while runs go on
(issue 24), and every stored record is checked.

- PostgreSQL (a throwaway server, fsync on) is stopped the hard way (`pg_ctl
  -m immediate stop`) `--pg-restarts` times, `--down` s each, at random
  moments, while a worker pool runs `--runs` chains on it;
- SQLite on a small tmpfs (mounting it needs root) is filled to the last byte
  for `--full` s while `--cli-runs` `flowforge run` processes run chains on it;
  a run cut off by it (exit 1: `--retry` shorter than `--full`) is finished
  with `flowforge runs resume`.  `--pg-restarts 0`: SQLite only.

Counted over every run (targets 0):
  missing       seqs absent below the run's last stored seq (a gap)
  duplicated    seqs stored twice
  out_of_order  a block started (stored) before its predecessor's success was stored
  finished_2x   runs with more than one `run_finished`
  repeated      side effects of a block started after its success was stored
  not_succeeded runs that did not end `succeeded`
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _pool import STEP_PLUGIN, Workers, chain

from flowforge.service.pool import enqueue
from flowforge.storage import storage_from_url, testing


def check(events: list[dict], log_lines: list[list[str]], blocks: int) -> dict:
    seqs = [e["seq"] for e in events]
    unique = set(seqs)
    out = {"wall_s": round(events[-1]["time"] - events[0]["time"], 1) if events else 0,
           "missing": (max(unique) - len(unique)) if unique else 0,
           "duplicated": len(seqs) - len(unique), "out_of_order": 0, "repeated": 0,
           "finished_2x": int([e["type"] for e in events].count("run_finished") > 1)}
    succeeded = {}
    for event in events:
        if event["type"] == "block_succeeded" and not event.get("resumed"):
            succeeded.setdefault(event["block_id"], event)
    for event in events:
        if event["type"] == "block_started" and event["block_id"] != "s0":
            before = succeeded.get(f"s{int(event['block_id'][1:]) - 1}")
            if before is None or before["seq"] > event["seq"]:
                out["out_of_order"] += 1
    for n in range(blocks):
        stored = succeeded.get(f"s{n}")
        if stored is not None:
            out["repeated"] += sum(1 for line in log_lines if line[0] == "start"
                                   and line[1] == str(n) and float(line[2]) > stored["time"])
    return out


def _add(totals: dict, found: dict) -> None:
    """Sum the counts; the slowest run's wall time (a paused run takes longer)."""
    for name, count in found.items():
        if name == "wall_s":
            totals["slowest_run_s"] = max(totals.get("slowest_run_s", 0), count)
        else:
            totals[name] = totals.get(name, 0) + count


def _lines(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


async def postgres_outages(folder: Path, broker: str, args) -> dict:
    server = testing.start(durable=True)
    queue = f"outage-{uuid.uuid4().hex[:6]}"
    workers = Workers(folder, broker, server.url, queue, lease=args.lease)
    rng = random.Random(args.seed)
    try:
        for _ in range(args.workers):
            workers.start(concurrency=args.concurrency)
        workers.wait_ready()
        storage = storage_from_url(server.url)
        await storage.open()
        runs: dict[str, Path] = {}
        for index in range(args.runs):
            log = folder / f"pg-run{index}.log"
            runs[await enqueue(chain(args.blocks, args.sleep, str(log), "outage"),
                               storage=storage, queue=queue, broker=broker)] = log
        await storage.close()
        for _ in range(args.pg_restarts):
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            testing.crash(server)
            await asyncio.sleep(args.down)
            server = testing.restart(server)
        storage = storage_from_url(server.url)
        await storage.open()
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            rows = [await storage.get_run(r) for r in runs]
            if all(row["status"] in ("succeeded", "failed", "cancelled") for row in rows):
                break
            await asyncio.sleep(0.5)
        totals = {"runs": len(runs), "not_succeeded": 0}
        for run_id, log in runs.items():
            row = await storage.get_run(run_id)
            totals["not_succeeded"] += row["status"] != "succeeded"
            _add(totals, check(await storage.get_events(run_id), _lines(log), args.blocks))
        await storage.close()
        retried = sum(path.read_text(errors="replace").count("a write to the database failed")
                      for path in folder.glob("worker-*.log"))
        return {"pg_restarts": args.pg_restarts, "down_s": args.down,
                "runs_paused_times": retried, **totals}
    finally:
        workers.stop()
        testing.stop(server)


def sqlite_disk_full(folder: Path, args) -> dict:
    disk = folder / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        return {"sqlite_skipped": f"cannot mount a small disk (needs root): "
                                  f"{mounted.stderr.strip()}"}
    try:
        return asyncio.run(_disk_full(folder, disk, args))
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


async def _disk_full(folder: Path, disk: Path, args) -> dict:
    database = f"sqlite:///{disk / 'runs.db'}"
    plugin = folder / "outage_plugin.py"
    plugin.write_text(STEP_PLUGIN)
    flowforge = [sys.executable, "-m", "flowforge.cli.main"]
    env = {**__import__("os").environ, "FLOWFORGE_DATABASE_URL": database,
           "FLOWFORGE_STORE_RETRY_SECONDS": str(args.retry)}
    processes = []
    for index in range(args.cli_runs):
        log = folder / f"sqlite-run{index}.log"
        document = folder / f"chain{index}.json"
        document.write_text(json.dumps(chain(args.blocks, args.sleep, str(log), "outage")))
        processes.append((subprocess.Popen([*flowforge, "run", str(document), "--json",
                                            "--import", str(plugin)], env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True), log))
    deadline = time.monotonic() + args.timeout     # every run is under way: fill the disk
    while time.monotonic() < deadline and not all(
            any(line[:2] == ["start", "2"] for line in _lines(log)) for _, log in processes):
        await asyncio.sleep(0.05)
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (65536, 512):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError:
                pass
    await asyncio.sleep(args.full)
    filler.unlink()
    results, cut_off, tracebacks, paused = {}, 0, 0, 0
    for process, log in processes:
        stdout, stderr = process.communicate(timeout=args.timeout)
        tracebacks += "Traceback" in stderr
        paused += "a write to the database failed" in stderr     # the window hit it
        result = json.loads(stdout)
        results[result["run_id"]] = log
        if process.returncode != 0:
            cut_off += 1
            subprocess.run([*flowforge, "runs", "resume", result["run_id"], "--import",
                            str(plugin), "--json"], env=env, capture_output=True,
                           timeout=args.timeout)
    storage = storage_from_url(database)
    await storage.open()
    totals = {"runs": len(results), "not_succeeded": 0}
    for run_id, log in results.items():
        row = await storage.get_run(run_id)
        totals["not_succeeded"] += row["status"] != "succeeded"
        _add(totals, check(await storage.get_events(run_id), _lines(log), args.blocks))
    await storage.close()
    return {"full_s": args.full, "runs_paused": paused, "cut_off_then_resumed": cut_off,
            "tracebacks": tracebacks,
            **totals}


def main(args, broker: str) -> dict:
    report = {}
    if args.pg_restarts:
        with tempfile.TemporaryDirectory() as name:
            report["postgres"] = asyncio.run(postgres_outages(Path(name), broker, args))
    with tempfile.TemporaryDirectory() as name:
        report["sqlite"] = sqlite_disk_full(Path(name), args)
    return report
