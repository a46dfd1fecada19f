"""`flowforge serve`: the HTTP server (FastAPI under uvicorn) on SQLite or
PostgreSQL, chosen by the database URL."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from flowforge.cli.exits import FAILED, INVALID, exit_code, fail
from flowforge.cli.options import db_option

__all__ = ["serve", "register"]

err = Console(stderr=True, soft_wrap=True, markup=False)   # long messages are never cut or broken


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on "
                             "(0.0.0.0 for every interface)."),
    port: int = typer.Option(8000, "--port", "-p", min=0, max=65535,
                             help="TCP port to listen on."),
    db: Optional[str] = db_option("sqlite:///file.db or postgresql://user@host/db "
                                  "(default: FLOWFORGE_DATABASE_URL, else the user data "
                                  "directory)."),
    max_body_bytes: Optional[int] = typer.Option(
        None, "--max-body-bytes", min=1, help="Refuse larger request bodies with 413 "
        "(default 1 MiB or FLOWFORGE_MAX_BODY_BYTES)."),
    model: Optional[str] = typer.Option(None, "--model", "-m",
                                        help="Model for every LLM block of every run."),
    log_level: str = typer.Option("info", "--log-level",
                                  help="uvicorn's log level: debug, info, warning or error."),
    keep_alive: int = typer.Option(
        75, "--keep-alive", min=1, help="Seconds an idle connection stays open. Longer "
        "than clients' and load balancers' own idle timeouts (httpx 5 s, AWS ALB 60 s), so "
        "the server never closes a connection just as a client reuses it."),
    allow_private_webhooks: bool = typer.Option(
        False, "--allow-private-webhooks", help="Let webhooks go to loopback, private and "
        "link-local addresses (off: refused, so users cannot reach internal services "
        "through the server; also FLOWFORGE_ALLOW_PRIVATE_WEBHOOKS=1)."),
    files_root: Optional[Path] = typer.Option(
        None, "--files-root", help="The folder that relative paths in documents resolve "
        "against (nested workflows, knowledge sources, scripted/ rules, local/ model "
        "files), for users granted server_files; also FLOWFORGE_FILES_ROOT. Unset: such "
        "paths are refused, saying so (never the working directory)."),
    allow_process_sandbox: bool = typer.Option(
        False, "--allow-process-sandbox", help="Without bubblewrap, run users' Python blocks "
        "in a plain process held by seccomp and rlimits only (off: they fail, saying so; "
        "also FLOWFORGE_ALLOW_PROCESS_SANDBOX=1)."),
    share_provider_keys: bool = typer.Option(
        False, "--share-provider-keys", help="Let every user's runs and builds use the provider keys "
        "in this process's environment (OPENAI_API_KEY, ...), sent only to the providers' "
        "configured URLs (off: users store their own keys with `flowforge secrets set`; "
        "also FLOWFORGE_SHARE_PROVIDER_KEYS=1)."),
    agent_webhook_url: Optional[str] = typer.Option(
        None, "--agent-webhook-url", help="The frontend that receives a signed POST with "
        "the task (id, status, logs, output) for every prompt-chain task of POST /api/agent "
        "that completes or fails; {task_id} in it becomes the task's id (also "
        "FLOWFORGE_AGENT_WEBHOOK_URL)."),
    chain_base_url: Optional[str] = typer.Option(
        None, "--chain-base-url", help="Where relative endPoints of prompt-chain event nodes "
        "point (also FLOWFORGE_CHAIN_BASE_URL)."),
    workers: Optional[str] = typer.Option(
        None, "--workers", help="`celery`: send runs to the worker pool "
        "(FLOWFORGE_BROKER_URL; start them with `flowforge worker`) instead of this process."),
    daily_user_tokens: Optional[int] = typer.Option(
        None, "--daily-user-tokens", min=1, help="Most model tokens one user's runs may use "
        "per UTC day (also FLOWFORGE_DAILY_USER_TOKENS); a call that would pass it fails."),
    daily_user_cost: Optional[float] = typer.Option(
        None, "--daily-user-cost", min=0, help="Most USD one user's runs may spend on models "
        "per UTC day (also FLOWFORGE_DAILY_USER_COST)."),
    max_user_runs: Optional[int] = typer.Option(
        None, "--max-user-runs", min=0, help="Runs one user may have in progress at once; "
        "one more is refused with 429 (default 16, also FLOWFORGE_MAX_USER_RUNS; 0: no limit)."),
    max_run_events: Optional[int] = typer.Option(
        None, "--max-run-events", min=0, help="Events one run may publish before it fails, "
        "naming the block (default 20000, also FLOWFORGE_MAX_RUN_EVENTS; 0: no limit)."),
    max_loop_passes: Optional[int] = typer.Option(
        None, "--max-loop-passes", min=0, help="Passes one loop block may run, items one "
        "parallel block may map (default 1000, also FLOWFORGE_MAX_LOOP_PASSES; 0: no limit)."),
    sandbox_memory_mb: Optional[int] = typer.Option(
        None, "--sandbox-memory-mb", min=1, help="Memory (MB) all sandboxed Python blocks may "
        "hold at once; a block that does not fit waits, then fails (default half the "
        "machine's memory, also FLOWFORGE_SANDBOX_MEMORY_MB)."),
    user_sandbox_memory_mb: Optional[int] = typer.Option(
        None, "--user-sandbox-memory-mb", min=1, help="Memory (MB) one user's sandboxed "
        "blocks may hold at once (default a quarter of --sandbox-memory-mb, also "
        "FLOWFORGE_USER_SANDBOX_MEMORY_MB)."),
    max_document_blocks: Optional[int] = typer.Option(
        None, "--max-document-blocks", min=0, help="Blocks one saved or validated document "
        "may hold (default 2000, also FLOWFORGE_MAX_DOCUMENT_BLOCKS; 0: no limit)."),
    max_user_rate: Optional[float] = typer.Option(
        None, "--max-user-rate", min=0, help="API requests one user (or one address without "
        "a key) may make per second; over it 429 with Retry-After (default 50, also "
        "FLOWFORGE_MAX_USER_RATE; 0: no limit). /health, pages and assets are not counted."),
    max_user_burst: Optional[int] = typer.Option(
        None, "--max-user-burst", min=1, help="Requests one user may make at once before "
        "--max-user-rate applies (default 100, also FLOWFORGE_MAX_USER_BURST)."),
    resume_interval: Optional[float] = typer.Option(
        None, "--resume-interval", min=0, help="Seconds between looks for waiting runs that "
        "are due (a wait's end, an approval's timeout), resumed here; 0: never (default 5, "
        "also FLOWFORGE_RESUME_INTERVAL)."),
    resume_runs: bool = typer.Option(
        True, "--resume/--no-resume", help="Runs cut off by a process that died (a crash, "
        "a restart): resumed here from their checkpoints, or (--no-resume) marked failed, "
        "naming the process and how to resume them (`flowforge runs resume RUN_ID`); also "
        "FLOWFORGE_RESUME_CUT_OFF=0. With --workers celery, the choice travels with each run "
        "this server queues: any worker that finds it cut off marks it failed."),
    imports: List[str] = typer.Option(
        [], "--import", "-I", help="Python file or module to import first, e.g. one "
        "registering @flowforge.function callables (as `flowforge run --import` and "
        "`flowforge worker --import`; with --workers celery, the workers import it)."),
) -> None:
    """Serve workflows, runs with live progress (SSE, WebSocket), history and memory."""
    try:
        import uvicorn

        from flowforge.server import ServerSettings, create_app
    except ImportError as exc:
        fail(f"the server needs its extra: pip install 'flowforge[server]' ({exc})", INVALID)
    from flowforge.cli.plumbing import import_plugins
    from flowforge.errors import StorageError
    from flowforge.processes import settle_heap
    from flowforge.storage import default_database_url, storage_from_url

    import_plugins(imports)
    url = db or default_database_url()
    try:
        users = asyncio.run(_check_database(storage_from_url, url))
    except StorageError as exc:
        fail(str(exc), exit_code(exc))
    if not users:
        err.print("no users yet: create one with `flowforge users create NAME --admin"
                  f"{' --db ' + db if db else ''}`", highlight=False)
    try:
        settings = ServerSettings(database_url=url, model=model)
    except ValueError as exc:                # a FLOWFORGE_* variable that is not a number
        fail(str(exc), INVALID)
    for name, value in (("daily_user_tokens", daily_user_tokens),
                        ("daily_user_cost", daily_user_cost),
                        ("resume_interval", resume_interval),
                        ("max_user_runs", max_user_runs), ("max_run_events", max_run_events),
                        ("max_loop_passes", max_loop_passes),
                        ("sandbox_memory_mb", sandbox_memory_mb),
                        ("user_sandbox_memory_mb", user_sandbox_memory_mb),
                        ("max_document_blocks", max_document_blocks),
                        ("max_user_rate", max_user_rate), ("max_user_burst", max_user_burst)):
        if value is not None:
            setattr(settings, name, value)
    if not resume_runs:
        settings.resume_cut_off = False
    if allow_private_webhooks:
        settings.allow_private_webhooks = True
    if share_provider_keys:
        settings.share_provider_keys = True
    if allow_process_sandbox:
        settings.allow_process_sandbox = True
    if files_root is not None:
        settings.files_root = str(files_root.resolve())
    if max_body_bytes is not None:
        settings.max_body_bytes = max_body_bytes
    if agent_webhook_url:
        settings.agent_webhook_url = agent_webhook_url
    if chain_base_url:
        settings.chain_base_url = chain_base_url
    if workers is not None:
        if workers not in ("celery", "none"):
            fail(f"--workers {workers!r}: use celery (or none)", INVALID)
        settings.workers = workers
    if settings.workers == "celery":
        from flowforge.service.pool import QueueError, celery_app
        try:
            celery_app()
        except QueueError as exc:
            fail(f"--workers celery: {exc}", INVALID)
    listening = _listen(host, port)
    # Everything in this process (the block registry too) uses the served database.
    os.environ["FLOWFORGE_DATABASE_URL"] = url
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host=host, port=port,
                                           log_level=log_level,
                                           proxy_headers=False,
                                           timeout_keep_alive=keep_alive))
    settle_heap()              # as the pool's workers do: see flowforge.processes
    try:
        server.run(sockets=[listening])
    finally:
        listening.close()
    if not server.started:        # the app did not start (its log says why)
        raise typer.Exit(FAILED)


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a port already in use is a
    message and exit 1 (as an unreachable database is), not uvicorn's own
    startup-failure code 3, which flowforge keeps for a waiting run."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        fail(f"--host {host}: {exc.strerror or exc}: give an "
             f"address such as 127.0.0.1 or 0.0.0.0", INVALID)
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = ("is already in use (another server?): stop that one, or choose another "
                  "port with --port" if exc.errno == errno.EADDRINUSE
                  else f"cannot be listened on: {exc.strerror or exc}")
        fail(f"{host}:{port} {reason}", FAILED)
    sock.set_inheritable(True)
    return sock


async def _check_database(storage_from_url, url: str) -> int:
    """Open once before serving: a bad URL is a message, not a traceback."""
    storage = storage_from_url(url)
    await storage.open()
    try:
        return len(await storage.list_users())
    finally:
        await storage.close()


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
