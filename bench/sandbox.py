"""Sandboxed Python blocks: how long one block takes, started cold or in a
process that was waiting, in each confinement the machine supports.

    .venv/bin/python bench/sandbox.py [--runs 30]

Prints one JSON line per (mode, start, gap): median and p90 ms for a small
block that imports `statistics`, with `gap` ms of other work between blocks
(0: back to back, the waiting process may still be importing), and the bare
interpreter's start as a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from flowforge.sandbox.process import _POOL, _interpreter, run_python, sandbox_mode  # noqa: E402

SOURCE = ("async def execute(inputs, context):\n    import statistics\n"
          "    return {'mean': statistics.mean(inputs['xs'])}\n")


async def measure(mode: str, warm: str, runs: int, gap_ms: int) -> dict:
    os.environ["FLOWFORGE_SANDBOX_WARM"] = warm
    _POOL.close()
    await run_python(SOURCE, {"xs": [1, 2]}, mode=mode)            # warm-up (and first fill)
    times = []
    for _ in range(runs):
        await asyncio.sleep(gap_ms / 1000)
        started = time.perf_counter()
        result = await run_python(SOURCE, {"xs": [1, 2, 3]}, mode=mode)
        times.append((time.perf_counter() - started) * 1000)
        assert result.output == {"mean": 2}
    _POOL.close()
    times.sort()
    return {"mode": mode, "start": "waiting" if warm != "0" else "cold", "gap_ms": gap_ms,
            "median_ms": round(statistics.median(times), 1),
            "p90_ms": round(times[int(len(times) * 0.9) - 1], 1)}


def interpreter_floor(runs: int) -> float:
    python, _ = _interpreter()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([python, "-I", "-S", "-B", "-c", "import statistics"], check=True)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    modes = ["bwrap", "process"] if sandbox_mode() == "bwrap" else ["process"]
    for mode in modes:
        for warm, gap in (("0", 100), ("1", 100), ("1", 0)):
            print(json.dumps(await measure(mode, warm, args.runs, gap)), flush=True)
    print(json.dumps({"floor": "bare interpreter start + import statistics, no sandbox",
                      "median_ms": interpreter_floor(args.runs)}))


if __name__ == "__main__":
    asyncio.run(main())
