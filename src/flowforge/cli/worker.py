"""`flowforge worker`: a worker that runs queued runs, and the CLI side of
`flowforge run FILE --queue` (enqueue, then follow the run's stored events).

On Redis, a worker process takes its run messages on the runs' own event loop
(`pool.RedisConsumer`), not through Celery's consumer and thread pool: that
handling cost a worker more CPU per run than the run itself.  Senders still
send Celery task messages, so Celery workers and these can share a queue.
What a Redis worker does not do: Celery's remote control and inspection
(`celery inspect`, `celery control`) and its task events.  On another broker
(amqp://, memory://) `flowforge worker` is a Celery worker as before.

    export FLOWFORGE_BROKER_URL=redis://127.0.0.1:6379/0
    export FLOWFORGE_DATABASE_URL=postgresql://.../flowforge   # shared by every machine
    flowforge worker --processes 2 --concurrency 16     # 32 runs at once
    flowforge run examples/support.yaml --queue --input query="..."

Exit codes as everywhere: 0 fine, 1 the run failed or was cancelled, 2 bad usage
(no broker configured, a bad URL), 3 the run waits (an approval, a long wait).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, List, Optional

import typer
from rich.console import Console

from flowforge.cli.exits import fail as _fail
from flowforge.cli.options import db_option
from flowforge.errors import FlowforgeError

__all__ = ["register", "worker_command", "run_on_queue"]

err = Console(stderr=True, soft_wrap=True, markup=False)


def worker_command(
    concurrency: int = typer.Option(8, "--concurrency", "-c", min=1,
                                    help="Runs at once in each worker process (they share "
                                         "one event loop: runs wait on models and HTTP, "
                                         "not on the CPU)."),
    processes: int = typer.Option(1, "--processes", "-P", min=1,
                                  help="Worker processes (use the cores: CPU-heavy blocks, "
                                       "parsing); runs at once = processes x concurrency."),
    queues: Optional[str] = typer.Option(None, "--queues", "-Q",
                                         help="Comma-separated queues to take runs from "
                                              "(default: FLOWFORGE_QUEUE, else flowforge)."),
    broker: Optional[str] = typer.Option(None, "--broker", help="Broker URL (default: "
                                         "FLOWFORGE_BROKER_URL)."),
    db: Optional[str] = db_option("Database the reaper watches (default: "
                                  "FLOWFORGE_DATABASE_URL or the user data directory); "
                                  "each run names its own."),
    reap: bool = typer.Option(True, "--reap/--no-reap", help="Look for runs whose process "
                              "died (their lease expired) and waiting runs that are due, "
                              "and fire schedules."),
    resume_runs: bool = typer.Option(True, "--resume/--no-resume", help="Runs cut off by a "
                                     "process that died: resumed from their checkpoints, or "
                                     "(--no-resume) marked failed, naming the process and "
                                     "how to resume them (`flowforge runs resume RUN_ID`); "
                                     "also FLOWFORGE_RESUME_CUT_OFF=0."),
    loglevel: str = typer.Option("warning", "--loglevel", help="Log level of the worker's "
                                 "lines (and of Celery's, on a broker other than Redis)."),
    imports: List[str] = typer.Option([], "--import", "-I",
                                      help="Python file or module to import first, e.g. one "
                                           "registering @flowforge.function callables."),
) -> None:
    """Run queued runs; runs whose worker died are resumed here.

    Each process runs up to --concurrency runs at once on one event loop (on
    Redis it takes its messages there itself; on another broker a Celery
    threads pool feeds it); a message is acknowledged when its run ends or
    waits, so a killed process's runs go back to the queue and are resumed.
    SIGTERM or Ctrl-C: no more runs are taken, the runs in flight finish
    (a second one stops at once; their runs are taken over)."""
    from flowforge.cli.plumbing import import_plugins
    from flowforge.service.pool import (QueueError, broker_url, default_queue, is_redis,
                                        prepare_worker, require_celery, start_reaper,
                                        worker_app)
    from flowforge.service.resuming import RESUME_CUT_OFF_ENV

    import_plugins(imports)
    _log_to_stderr(loglevel)
    queues = queues or default_queue()
    try:
        url = broker_url(broker)
        require_celery()
        # On Redis a worker takes its messages itself, and a supervisor only starts
        # workers: Celery's application (~0.25 s of CPU to import and build) is
        # needed only by a worker on another broker, and by whatever sends.
        app = worker_app(broker) if processes == 1 and not is_redis(url) else None
    except QueueError as exc:
        _fail(str(exc))
    if db:
        os.environ["FLOWFORGE_DATABASE_URL"] = db
    if not resume_runs:
        os.environ[RESUME_CUT_OFF_ENV] = "0"      # this process, its reaper, its children
    stop = start_reaper(db, broker=broker, queue=queues.split(",")[0]) if reap else None
    _share_memory(processes)
    try:
        if processes > 1:
            code = _supervise(processes, concurrency, queues, broker, loglevel, imports)
        elif app is None:
            prepare_worker(db)
            code = _redis_worker(url, queues, concurrency)
        else:
            prepare_worker(db)
            code = _celery_worker(app, [
                "worker", "--pool=threads", f"--concurrency={concurrency}", "-Q", queues,
                f"--loglevel={loglevel}", "--without-gossip", "--without-mingle", "-n",
                f"flowforge-{os.getpid()}@%h"])
    finally:
        if stop is not None:
            stop.set()
    if code:
        _fail(f"the worker stopped on an error (exit status {code}); its log above says why",
              code if isinstance(code, int) else 1)


def _share_memory(processes: int) -> None:
    """Charge this worker's sandboxed blocks to the machine's budget (as a
    server's are); a supervisor hands each of its processes its share, which
    they read as their own whole (`--processes 1`)."""
    from flowforge.sandbox.memory import install_budget, worker_budget

    budget = worker_budget(processes)
    if processes > 1:
        os.environ["FLOWFORGE_SANDBOX_MEMORY_MB"] = str(budget.total_mb)
        os.environ["FLOWFORGE_USER_SANDBOX_MEMORY_MB"] = str(budget.per_user_mb)
    else:
        install_budget(budget)


def _log_to_stderr(level: str) -> None:
    """flowforge's own log lines (the reaper's takeovers, dropped messages) beside
    Celery's, at the worker's --loglevel: Celery leaves the root logger alone."""
    import logging

    logger = logging.getLogger("flowforge")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(
            "[%(asctime)s: %(levelname)s/%(processName)s] %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level.upper() if level.upper() in logging.getLevelNamesMapping()
                    else logging.WARNING)
    logger.propagate = False


def _celery_worker(app: Any, argv: list[str]) -> int:
    """`celery worker ...` on `app` in this process; its exit status.  (Not
    `app.worker_main` or `app.start`: both drop the status, so a worker that
    stopped on an unrecoverable error exited 0 and nothing restarted it.)"""
    from celery.bin.celery import celery

    celery.params[0].default = app
    try:
        code = celery.main(args=argv, standalone_mode=False)
    finally:
        celery.params[0].default = None
    return code if isinstance(code, int) else 0


def _redis_worker(url: str, queues: str, concurrency: int) -> int:
    """Take runs from Redis on this process's loop (`pool.RedisConsumer`) until
    SIGTERM or Ctrl-C (a warm shutdown: the runs in flight finish; a second
    signal exits at once, leaving them to the reapers); the exit status."""
    import signal
    import socket
    import sys
    import threading

    from flowforge.service.pool import RedisConsumer, process_loop

    loop = process_loop().loop
    name = f"flowforge-{os.getpid()}@{socket.gethostname()}"
    ready = threading.Event()

    async def make() -> RedisConsumer:
        return RedisConsumer(url, queues.split(","), concurrency, on_ready=ready.set)

    consumer = asyncio.run_coroutine_threadsafe(make(), loop).result()
    serving = asyncio.run_coroutine_threadsafe(consumer.serve(), loop)
    signals = 0

    def stop(signum: int, _frame: Any) -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            print(f"{name}: stopping now; {len(consumer.running)} run(s) in flight are "
                  f"taken over by other workers", file=sys.stderr, flush=True)
            os._exit(1)

        async def stopping() -> None:
            consumer.stop()
            print(f"{name}: warm shutdown: no more runs taken, {len(consumer.running)} in "
                  f"flight finish (send the signal again to stop now)", file=sys.stderr,
                  flush=True)

        asyncio.run_coroutine_threadsafe(stopping(), loop)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    said_ready = False
    while True:
        if not said_ready and ready.is_set():
            said_ready = True
            print(f"{name} ready. queues {queues}, {concurrency} runs at once",
                  file=sys.stderr, flush=True)
        try:
            serving.result(timeout=0.2)
            return 0
        except TimeoutError:
            continue
        except Exception as exc:  # noqa: BLE001 - said, and the status says it
            print(f"{name}: Unrecoverable error: {type(exc).__name__}({str(exc)!r}) from the "
                  f"broker (check its URL and the Redis server)", file=sys.stderr, flush=True)
            return 1


def _supervise(processes: int, concurrency: int, queues: str, broker: str | None,
               loglevel: str, imports: list[str]) -> int:
    """Start `processes` single-process workers (this process reaps for them) and
    keep them running: one that dies is started again; SIGTERM or Ctrl-C stops
    them all (each finishes or hands back its runs as a worker does).  The exit
    status: the first non-zero one of the workers as they stopped, else 0."""
    import signal
    import subprocess
    import sys
    import time

    command = [sys.executable, "-m", "flowforge.cli.main", "worker", "--processes", "1",
               "--concurrency", str(concurrency), "--queues", queues, "--no-reap",
               "--loglevel", loglevel, *(["--broker", broker] if broker else []),
               *[arg for name in imports for arg in ("--import", name)]]
    children = [subprocess.Popen(command) for _ in range(processes)]
    stopping = False

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping:
        for index, child in enumerate(children):
            if child.poll() is not None and not stopping:
                err.print(f"worker process {child.pid} ended ({child.returncode}); "
                          f"starting another", highlight=False)
                time.sleep(1)
                children[index] = subprocess.Popen(command)
        time.sleep(0.5)
    codes = []
    for child in children:
        try:
            codes.append(child.wait())
        except KeyboardInterrupt:
            child.kill()
    # a child stopped by our SIGTERM exits 0 (a warm shutdown); one killed meanwhile
    # by a signal has a negative status: the supervisor was asked to stop, so 0
    return next((code for code in codes if code > 0), 0)


def run_on_queue(workflow: Any, inputs: dict[str, Any], *, user: str, model: str | None,
                 db: str | None, broker: str | None, as_json: bool, quiet: bool) -> int:
    """Enqueue, follow the stored events (live view), print the outcome; the exit code."""
    from flowforge.cli.exits import run_exit_code
    from flowforge.cli.progress import LiveProgress
    from flowforge.cli.runs_view import show_run
    from flowforge.service.pool import enqueue
    from flowforge.service.runs import open_storage

    async def go(progress: Any) -> str:
        run_id = await enqueue(workflow, inputs, user=user, model=model, storage=db,
                               broker=broker)
        if not as_json:
            err.print(f"queued run {run_id}", highlight=False)
        async with open_storage(db) as storage:
            async for event in storage.follow_events(run_id, 0):
                if progress is not None:
                    progress.on_event(event)
            row = await storage.get_run(run_id)
        return run_id if row is None else row["run_id"]

    progress = None if (as_json or quiet) else LiveProgress(workflow, err)
    try:
        if progress:
            progress.start()
        try:
            run_id = asyncio.run(go(progress))
        finally:
            if progress:
                progress.stop()
    except FlowforgeError as exc:
        from flowforge.cli.exits import exit_code
        _fail(str(exc), exit_code(exc))
    except KeyboardInterrupt:
        _fail("interrupted: the run goes on in the pool (`flowforge runs cancel` stops it)", 1)

    async def outcome() -> str:
        async with open_storage(db) as storage:
            row = await storage.get_run(run_id)
            return row["status"] if row else "failed"

    status = asyncio.run(outcome())
    asyncio.run(show_run(db, run_id, as_json, False, Console(markup=False)))
    return run_exit_code(status)


schedules_app = typer.Typer(help="Stored workflows' schedules (`triggers:`), fired by the "
                                   "worker pool.", no_args_is_help=True)


@schedules_app.command("list")
def schedules_list(
    db: Optional[str] = db_option(),
    user: Optional[str] = typer.Option(None, "--user", "-u", help="Only this user's "
                                       "workflows (their id)."),
) -> None:
    """Every trigger of the stored workflows: cron, zone, next time, last firing."""
    from flowforge.service.pool import list_schedules

    try:
        found = asyncio.run(list_schedules(db, owner=user))
    except FlowforgeError as exc:
        from flowforge.cli.exits import exit_code
        _fail(str(exc), exit_code(exc))
    out = Console(markup=False)
    if not found:
        out.print("no schedules: add `triggers: [{cron: \"0 7 * * *\"}]` to a stored workflow")
        return
    for item in found:
        state = "" if item["enabled"] else "  (disabled)"
        last = f"last {item['last']} run {item['last_run_id']}" if item["last"] else "never fired"
        out.print(f"{item['owner']}/{item['workflow_id']}[{item['trigger']}]  "
                  f"{item['cron']} ({item['timezone']})  next {item['next']}  {last}{state}",
                  highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("worker")(worker_command)
    app.add_typer(schedules_app, name="schedules")
