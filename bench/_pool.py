"""What bench/workers.py and bench/chaos.py share: a throwaway Redis, worker
processes started and killed like machines, and the step function their
workflows call (sleeps, then appends to a side-effect log: `start|end N TIME PID KEY`)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The flowforge measured: this checkout's, or FLOWFORGE_BENCH_SRC's (another
#: version's `src`, e.g. `git archive main src | tar -x -C /tmp/main`, to measure
#: before and after with the same bench).  The worker processes are given it on
#: PYTHONPATH: without it they imported whatever flowforge the venv had installed.
SRC = Path(os.environ.get("FLOWFORGE_BENCH_SRC") or ROOT / "src").resolve()
sys.path.insert(0, str(SRC))

STEP_PLUGIN = '''
import asyncio, os, time
import flowforge

@flowforge.function("bench_step")
async def bench_step(n: int, seconds: float = 0.02, log: str = "", idempotency_key: str = ""):
    if log:
        with open(log, "a") as out:
            out.write(f"start {n} {time.time():.6f} {os.getpid()} {idempotency_key}\\n")
    await asyncio.sleep(seconds)
    if log:
        with open(log, "a") as out:
            out.write(f"end {n} {time.time():.6f} {os.getpid()} {idempotency_key}\\n")
    return {"n": n}

if os.environ.get("BENCH_PROFILE"):      # bench/worker_cpu.py --profile: the runs' loop
    import cProfile
    from flowforge.service.pool import process_loop

    _loop, _profile = process_loop().loop, cProfile.Profile()
    _path = f"{os.environ['BENCH_PROFILE']}.{os.getpid()}"

    def _dump():
        _profile.disable()
        _profile.dump_stats(_path)
        _profile.enable()
        _loop.call_later(1.0, _dump)

    _loop.call_soon_threadsafe(lambda: (_profile.enable(), _loop.call_later(1.0, _dump)))
'''


def redis_server():
    spec = importlib.util.spec_from_file_location("redis_server",
                                                  ROOT / "scripts" / "redis_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.RedisServer()


def chain(count: int, seconds: float, log: str = "", workflow_id: str = "bench") -> dict:
    return {"id": workflow_id, "concurrency": 1, "blocks": [
        {"id": f"s{n}", "type": "function",
         "with": {"function": "bench_step", "args": {"n": n, "seconds": seconds, "log": log}},
         **({"after": [f"s{n - 1}"]} if n else {})} for n in range(count)]}


class Workers:
    def __init__(self, folder: Path, broker: str, database: str, queue: str,
                 lease: float = 3.0) -> None:
        self.folder, self.queue = folder, queue
        self.plugin = folder / "bench_plugin.py"
        self.plugin.write_text(STEP_PLUGIN)
        self.env = {**os.environ, "PYTHONPATH": str(SRC), "FLOWFORGE_BROKER_URL": broker,
                    "FLOWFORGE_DATABASE_URL": database, "FLOWFORGE_QUEUE": queue,
                    "FLOWFORGE_LEASE_SECONDS": str(lease),
                    "FLOWFORGE_QUEUE_VISIBILITY": "10",
                    "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{folder / 'kb.db'}"}
        self.processes: list[subprocess.Popen] = []
        self.expected = 0                   # Celery worker processes started

    def start(self, concurrency: int = 1, processes: int = 1,
              host: str | None = None) -> subprocess.Popen:
        """`flowforge worker`: `processes` processes, `concurrency` runs at once each;
        `host`: the machine its leases name (FLOWFORGE_HOST), as if it ran on another
        one (its dead processes are then found by the lease's expiry only)."""
        log = open(self.folder / f"worker-{len(self.processes)}.log", "w")
        process = subprocess.Popen(
            [sys.executable, "-m", "flowforge.cli.main", "worker", "--concurrency",
             str(concurrency), "--processes", str(processes), "--import", str(self.plugin),
             "--loglevel", "info"],
            cwd=ROOT, env={**self.env, **({"FLOWFORGE_HOST": host} if host else {})},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.processes.append(process)
        self.expected += processes
        return process

    def kill(self, process: subprocess.Popen) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(10)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    self.kill(process)

    def wait_ready(self, seconds: float = 60.0) -> None:
        """Until every Celery worker process started says it is ready."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            said = sum((self.folder / f"worker-{n}.log").read_text().count(" ready.")
                       for n in range(len(self.processes)))
            if said >= self.expected:
                return
            time.sleep(0.1)


async def restart_redis_at_random(redis, args, rng, all_ended, restarts: list[float]) -> None:
    """Restart the broker `args.redis_restarts` times, each after a random wait
    around `args.redis_every` seconds (down `args.redis_down` s), unless every
    run ended first; each restart's time goes to `restarts`."""
    import asyncio

    for _ in range(args.redis_restarts):
        await asyncio.sleep(rng.uniform(0.5, 2 * args.redis_every - 0.5))
        if await all_ended():
            return
        restarts.append(time.time())
        await asyncio.to_thread(redis.restart, args.redis_down)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")
