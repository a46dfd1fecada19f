"""Issue 46's ratios as a distribution rather than a figure: recording's cost
(`bench/durability.py`) and tracing's (`bench/engine.py --tracing
--frozen-heap`), each run several times in fresh processes, interleaved (and,
given several trees, alternated tree by tree within each run), with the load
average and the CPU time stolen by the hypervisor beside every figure.

    .venv/bin/python bench/ratios.py [--runs 5] [--rounds 5] [--no-postgres]
        [--only recording|tracing] [--tree /path/to/other/clone ...] [--heap-as-imported]

One figure from one process said little on the VM these were first measured
on: the same tree gave 1.66 and 2.90 a few minutes apart.  The causes this
prints beside the figures are the ones that differ between machines and
minutes: the CPU model, the clock source and its resolution (a VM without a
stable TSC pays a system call per timer read), the Python build (PGO/LTO, a
shared libpython), the C library's allocator, and the steal time (a busy
neighbour on the host takes cycles that the load average never shows).  The
recorded / memory walls also follow the CPU's speed itself: a recorded round
is CPU-bound and an in-memory one mostly sleeps, so a faster core lowers the
wall ratio while the loop-CPU ratio stays (bench/RESULTS.md, seventh session).  Each tree runs its own
bench files, so an old clone is measured with its own benches.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: the figure each bench prints and the name this report gives it
FIGURES = {
    "recording": [("ratio_sqlite", "recorded / memory, SQLite (goal <= 1.5)"),
                  ("ratio_postgres", "recorded / memory, PostgreSQL (goal <= 2)"),
                  ("loop_cpu_sqlite_over_memory", "loop CPU SQLite / memory (goal <= 1.5)"),
                  ("loop_cpu_floor_sqlite", "the same with only SQLite's statements added"),
                  ("sqlite_statements_ms", "loop CPU ms a round in SQLite's statements"),
                  ("loop_cpu_ms_memory", "loop CPU ms a round, memory"),
                  ("loop_cpu_ms_sqlite", "loop CPU ms a round, SQLite"),
                  ("loop_cpu_ms_postgres", "loop CPU ms a round, PostgreSQL")],
    "tracing": [("s4_ratio_on_over_off", "traced / untraced S4 (goal <= 1.5)"),
                ("added_over_raw_sdk", "flowforge's added / raw SDK's added, wall (goal <= 1.5)"),
                ("cpu_added_over_raw_sdk", "the same in the loop's CPU"),
                ("s4_added_by_tracing", "S4 added by tracing, of ideal"),
                ("bare_s4_added_by_raw_sdk_spans", "S4 added by raw SDK spans, of ideal")],
}


def machine() -> dict:
    """What differs between two machines that run the same tree."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info
                        if line.startswith("model name")), "?")
    except OSError:
        pass
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            clocksource = f.read().strip()
    except OSError:
        clocksource = "?"
    config = sysconfig.get_config_var("CONFIG_ARGS") or ""
    return {"cpu": cpu, "cores": os.cpu_count(), "clocksource": clocksource,
            "perf_counter": time.get_clock_info("perf_counter").implementation,
            "python": platform.python_version(),
            # (a distribution that runs the PGO step itself, as Debian does, shows
            # false here: its own notes say what it built with)
            "pgo": "--enable-optimizations" in config, "lto": "--with-lto" in config,
            # an interpreter calling its own core through a shared libpython (pyenv's,
            # `--enable-shared`) ran pure-Python tests 5-23 % slower here than
            # Debian's, which links it into the executable
            "libpython_shared": _libpython_shared(),
            "build_opt": sysconfig.get_config_var("OPT") or "",
            "libc": "-".join(platform.libc_ver()),
            "pythonmalloc": os.environ.get("PYTHONMALLOC", "default")}


def _libpython_shared() -> bool | None:
    """Whether this interpreter runs its core from libpython*.so (a mapped file)."""
    try:
        with open("/proc/self/maps") as maps:
            return any("libpython" in line for line in maps)
    except OSError:
        return None


def _cpu_ticks() -> tuple[int, int]:
    """(all ticks, stolen ticks) from /proc/stat's first line."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except OSError:
        return 0, 0
    return sum(fields), fields[7] if len(fields) > 7 else 0


def run_bench(tree: str, part: str, rounds: int, postgres: bool, frozen: bool) -> dict:
    """One fresh process of one bench of one tree; its JSON plus the context."""
    heap = ["--frozen-heap"] if frozen else []
    if part == "recording":
        command = [sys.executable, os.path.join(tree, "bench", "durability.py"),
                   "--rounds", str(rounds)] + ([] if postgres else ["--no-postgres"]) + heap
    else:
        command = [sys.executable, os.path.join(tree, "bench", "engine.py"),
                   "--tracing"] + heap
    load = os.getloadavg()[0]
    total0, steal0 = _cpu_ticks()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.path.join(tree, "src")})
    total1, steal1 = _cpu_ticks()
    figures: dict = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            figures.update(json.loads(line))
    if done.returncode != 0 or not figures:
        raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode}):\n"
                         f"{done.stderr[-2000:]}")
    if "loop_cpu_ms_sqlite" in figures:
        figures["loop_cpu_sqlite_over_memory"] = round(
            figures["loop_cpu_ms_sqlite"] / figures["loop_cpu_ms_memory"], 2)
    raw = figures.get("bare_s4_added_by_raw_sdk_spans")
    if raw:
        figures["added_over_raw_sdk"] = round(figures["s4_added_by_tracing"] / raw, 2)
    steal = (steal1 - steal0) / (total1 - total0) if total1 > total0 else 0.0
    return {"tree": tree, "part": part, "load": round(load, 2),
            "steal_pct": round(100 * steal, 1),
            "seconds": round(time.perf_counter() - start, 1), **figures}


def summary(rows: list[dict]) -> list[dict]:
    """Median, quartiles and range of every figure, per tree."""
    out = []
    for tree in dict.fromkeys(row["tree"] for row in rows):
        for part, figures in FIGURES.items():
            mine = [row for row in rows if row["tree"] == tree and row["part"] == part]
            for key, label in figures:
                values = sorted(row[key] for row in mine if key in row)
                if not values:
                    continue
                quartiles = (statistics.quantiles(values, n=4) if len(values) > 1
                             else [values[0]] * 3)
                out.append({"tree": tree, "figure": label, "runs": len(values),
                            "median": round(statistics.median(values), 3),
                            "q1": round(quartiles[0], 3), "q3": round(quartiles[2], 3),
                            "min": values[0], "max": values[-1],
                            "load": [row["load"] for row in mine]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds inside each durability process")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--only", choices=sorted(FIGURES))
    parser.add_argument("--tree", action="append", default=[],
                        help="another clone to alternate with this one (repeatable)")
    parser.add_argument("--heap-as-imported", action="store_true",
                        help="leave the heap as a program embedding flowforge has it, instead "
                             "of settled as `serve` and the workers settle theirs")
    args = parser.parse_args()
    trees = [ROOT] + [os.path.abspath(tree) for tree in args.tree]
    parts = [args.only] if args.only else list(FIGURES)
    print(json.dumps({"machine": machine()}), flush=True)
    rows = []
    for index in range(args.runs):
        # alternate which tree goes first so neither always runs after the other
        order = trees if index % 2 == 0 else trees[::-1]
        for part in parts:
            for tree in order:
                row = run_bench(tree, part, args.rounds, not args.no_postgres,
                                not args.heap_as_imported)
                rows.append(row)
                print(json.dumps({"run": index + 1, **row}), flush=True)
    for line in summary(rows):
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
