"""The run tracer of an earlier commit against today's, in one process run:
what tracing adds to S1 (µs per block) and S4 (wall / 100 ms) with each, the
two swapped round by round (`bench/engine.py --tracing` has the scenarios
and the exporter set-up).

    .venv/bin/python bench/tracing_before_after.py 25fa5ab [--repeat 7] [--frozen-heap]

The earlier `src/flowforge/service/tracing.py` is read with `git show` and
loaded beside the current one; each round measures S1 (then S4) with tracing
off, with the earlier tracer and with the current one (S4 also by the event
loop's CPU: `time.thread_time`).  Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

import engine as bench  # noqa: E402  (puts src/ on the path)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the earlier commit, e.g. 25fa5ab")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--frozen-heap", action="store_true",
                        help="settle the heap first, as `flowforge serve` and the workers do "
                             "(flowforge.processes.settle_heap; see bench/engine.py)")
    args = parser.parse_args()
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, \
        SpanExportResult

    from flowforge.service import new_run as runs   # where a run's tracer is made
    from flowforge.service import tracing as current

    root = os.path.join(os.path.dirname(__file__), "..")
    source = subprocess.run(["git", "show", f"{args.commit}:src/flowforge/service/tracing.py"],
                            cwd=root, capture_output=True, text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(source)
    spec = importlib.util.spec_from_file_location("earlier_tracing", file.name)
    earlier = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(earlier)                     # type: ignore[union-attr]
    os.unlink(file.name)

    class Discard(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard(), max_queue_size=65536))
    if args.frozen_heap:
        from flowforge.processes import settle_heap

        settle_heap()

    def use(label: str) -> None:
        for module in (earlier, current):
            module.use_tracer_provider(None if label == "off" else provider)
        chosen = earlier if label == "earlier" else current
        runs.tracer_for_run, runs.tracing_enabled = chosen.tracer_for_run, chosen.tracing_enabled

    engine = bench.Flowforge()
    labels = ("off", "earlier", "current")
    s1: dict[str, list[float]] = {label: [] for label in labels}
    s4: dict[str, list[float]] = {label: [] for label in labels}
    for label in labels:                                  # warm-up
        use(label)
        await engine.s1()
        await engine.s4()
    for _ in range(args.repeat):
        for label in labels:
            use(label)
            s1[label].append(await bench.timed(engine.s1) / bench.CHAIN * 1e6)
    cpu: dict[str, list[float]] = {label: [] for label in labels}
    for _ in range(max(9, args.repeat)):
        for label in labels:
            use(label)
            started = time.thread_time()
            s4[label].append(await bench.timed(engine.s4) * 1000
                             / (bench.RUN_CHAIN * bench.SLEEP_MS))
            cpu[label].append((time.thread_time() - started) * 1000)
    use("off")
    runs.tracer_for_run, runs.tracing_enabled = current.tracer_for_run, current.tracing_enabled
    provider.shutdown()
    s1m = {label: statistics.median(values) for label, values in s1.items()}
    s4m = {label: statistics.median(values) for label, values in s4.items()}
    print(json.dumps({
        "commit": args.commit,
        "s1_us_per_block": {label: round(value, 1) for label, value in s1m.items()},
        "s1_added_earlier_current": [round(s1m["earlier"] - s1m["off"], 1),
                                     round(s1m["current"] - s1m["off"], 1)],
        "s4_wall_over_ideal": {label: round(value, 3) for label, value in s4m.items()},
        "s4_added_earlier_current": [round(s4m["earlier"] - s4m["off"], 3),
                                     round(s4m["current"] - s4m["off"], 3)],
        # the event loop's CPU per S4 round (ms), and what each tracer adds to it
        "s4_loop_cpu_ms": {label: round(statistics.median(values), 1)
                           for label, values in cpu.items()},
        "s4_cpu_added_earlier_current_ms": [
            round(statistics.median(cpu["earlier"]) - statistics.median(cpu["off"]), 1),
            round(statistics.median(cpu["current"]) - statistics.median(cpu["off"]), 1)]}))


if __name__ == "__main__":
    asyncio.run(main())
