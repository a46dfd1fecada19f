"""The cost of durability: S4 of bench/engine.py (500 concurrent runs of a 5-block
chain whose blocks sleep 20 ms) with every run recorded (its row, every event,
every block checkpoint, its outcome) against the same S4 in memory, in one
process, rounds interleaved so that both see the same machine.

    .venv/bin/python bench/durability.py [--rounds 9] [--no-postgres] [--frozen-heap]

Prints one JSON line: S4 wall / ideal (100 ms) in memory, recorded in SQLite,
recorded in PostgreSQL (a throwaway server on loopback, fsync on, as a real
one), and the ratios recorded / in memory (issue 12's target: <= 2).  Each
figure is the median of `--rounds`; `loop_cpu_ms` is the event loop thread's
CPU per round (less noisy than the wall when the machine is shared).
`--frozen-heap` settles the heap first as `flowforge serve` and the pool's
workers do (the processes that record runs in production); by default it is
left as a program that embeds flowforge has it.

`sqlite_statements_ms` is the part of SQLite's loop CPU spent inside the group
commit's statements (BEGIN to COMMIT: the database's own work, which no change
to flowforge's Python can remove while it runs on the loop's thread), and
`loop_cpu_floor_sqlite` the loop-CPU ratio a recorder costing nothing else
would reach: (memory + statements) / memory.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from engine import RUN_CHAIN, SLEEP_MS, Flowforge  # noqa: E402

from flowforge.storage import storage_from_url  # noqa: E402

IDEAL_S = RUN_CHAIN * SLEEP_MS / 1000


async def measure(rounds: int, postgres_url: str | None) -> dict:
    _timed_statements()
    engine = Flowforge()
    folder = tempfile.mkdtemp(prefix="flowforge-durability-")
    targets: dict[str, object] = {"memory": False}
    targets["sqlite"] = storage_from_url(f"sqlite:///{folder}/bench.db")
    if postgres_url:
        targets["postgres"] = storage_from_url(postgres_url)
    for storage in targets.values():
        if storage is not False:
            await storage.open()
    walls: dict[str, list[float]] = {name: [] for name in targets}
    cpus: dict[str, list[float]] = {name: [] for name in targets}
    statements: list[float] = []
    for name, storage in targets.items():            # warm-up: caches, tables, pools
        await engine.s4(storage)
    for _ in range(rounds):
        for name, storage in targets.items():
            _STATEMENTS[0] = 0.0
            cpu, start = time.thread_time(), time.perf_counter()
            await engine.s4(storage)
            walls[name].append(time.perf_counter() - start)
            cpus[name].append(time.thread_time() - cpu)
            if name == "sqlite":
                statements.append(_STATEMENTS[0])
    for storage in targets.values():
        if storage is not False:
            await storage.close()
    out: dict = {"bench": "durability", "rounds": rounds, "python": platform.python_version(),
                 "heap": "frozen" if gc.get_freeze_count() else "as imported"}
    for name in targets:
        out[f"s4_{name}"] = round(statistics.median(walls[name]) / IDEAL_S, 3)
        out[f"loop_cpu_ms_{name}"] = round(statistics.median(cpus[name]) * 1000, 1)
    for name in targets:
        if name != "memory":
            out[f"ratio_{name}"] = round(out[f"s4_{name}"] / out["s4_memory"], 2)
    out["sqlite_statements_ms"] = round(statistics.median(statements) * 1000, 1)
    out["loop_cpu_floor_sqlite"] = round(
        (out["loop_cpu_ms_memory"] + out["sqlite_statements_ms"]) / out["loop_cpu_ms_memory"], 2)
    return out


#: loop CPU inside SQLite's group statements during the current round
_STATEMENTS = [0.0]


def _timed_statements() -> None:
    """Count the thread CPU of every group commit's statements (`_commit`)."""
    from flowforge.storage import sqlite_writes

    commit = sqlite_writes._commit

    def timed(*args, **kwargs):
        cpu = time.thread_time()
        try:
            return commit(*args, **kwargs)
        finally:
            _STATEMENTS[0] += time.thread_time() - cpu

    sqlite_writes._commit = timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-postgres", action="store_true",
                        help="SQLite only (PostgreSQL needs `make install`'s server binaries)")
    parser.add_argument("--frozen-heap", action="store_true",
                        help="freeze what the imports left and collect the young generation "
                             "less often first, as `flowforge serve` and the workers do "
                             "(flowforge.processes.settle_heap)")
    args = parser.parse_args()
    if args.frozen_heap:
        from flowforge.processes import settle_heap

        settle_heap()
    server = None
    if not args.no_postgres:
        from flowforge.storage import testing
        server = testing.start(durable=True)
    try:
        result = asyncio.run(measure(args.rounds, server.url if server else None))
    finally:
        if server is not None:
            from flowforge.storage import testing
            testing.stop(server)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
