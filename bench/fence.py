"""The cost of fencing a run's writes by its lease (issue 24): one group of
`--runs` one-event writes (one per run, as a loop turn of that many runs
makes), stored plain and fenced (`record_later(fence=...)`), alternately, on
SQLite and on PostgreSQL (the suite's throwaway server, a schema of its own).

    .venv/bin/python bench/fence.py [--runs 500] [--groups 10] [--repeat 5] [--no-postgres]

Prints one JSON line: per back end, the median over `--repeat` of the time per
group, plain and fenced: CPU of this process (`cpu_ms`: the event loop's work,
steady on a shared machine) and wall (`wall_ms`: with PostgreSQL, the server's
work too).  A group writes what a loop turn of `--runs` runs would: an event
each, as small as events get, so the fence's share is as large as it gets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from flowforge.storage import storage_from_url, testing  # noqa: E402

OWNER = "bench:1:fence"


async def _measure(url: str, args: argparse.Namespace) -> dict:
    storage = storage_from_url(url)
    await storage.open()
    ids = [f"r{n}" for n in range(args.runs)]
    for run_id in ids:
        await storage.create_run({"run_id": run_id, "workflow_id": "fence", "status": "running",
                                  "created_at": time.time(), "lease_owner": OWNER,
                                  "lease_expires_at": time.time() + 3600,
                                  "document": {"blocks": ["x" * 2000]}})
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    seq = 0
    try:
        for fenced in (False, True) * args.repeat:
            fence = {"fence": (OWNER, 3600.0)} if fenced else {}
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(args.groups):
                seq += 1
                await asyncio.gather(*(storage.record_later(
                    run_id, [{"seq": seq, "type": "progress", "run_id": run_id, "time": 1.0}],
                    [], **fence) for run_id in ids))
            times[fenced].append(((time.process_time() - cpu) / args.groups * 1000,
                                  (time.perf_counter() - wall) / args.groups * 1000))
    finally:
        await storage.close()
    out = {}
    for fenced, name in ((False, "plain"), (True, "fenced")):
        out[f"{name}_cpu_ms"] = round(statistics.median(c for c, _ in times[fenced]), 2)
        out[f"{name}_wall_ms"] = round(statistics.median(w for _, w in times[fenced]), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    report: dict = {"bench": "fence", "runs_per_group": args.runs}
    with tempfile.TemporaryDirectory() as folder:
        report["sqlite"] = asyncio.run(_measure(f"sqlite:///{folder}/fence.db", args))
    if not args.no_postgres:
        with testing.temporary_schema(testing.shared_url(), "fence_") as url:
            report["postgres"] = asyncio.run(_measure(url, args))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
