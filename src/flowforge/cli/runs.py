"""`flowforge runs ...`: stored runs: list, show, cancel, resume a run that
was cut off, approve or reject a waiting one, resume the runs that are due."""

from __future__ import annotations

from typing import Any, List, Optional

import typer

from flowforge.cli.exits import fail
from flowforge.cli.options import db_option
from flowforge.cli.plumbing import err, import_plugins, out, show_result, storage_call

__all__ = ["runs_app"]

runs_app = typer.Typer(help="Stored runs: list, show, cancel, approve or reject, resume.",
                       no_args_is_help=True)


_RUN_ID_HELP = "A run id, or a unique prefix of one (`flowforge runs list` shows them)."


@runs_app.command("list")
def runs_list(
    workflow: Optional[str] = typer.Option(None, "--workflow", "-w",
                                           help="Only runs of this workflow id."),
    status: Optional[str] = typer.Option(None, "--status", "-s",
                                         help="Only runs in this state: running, waiting, "
                                              "succeeded, failed or cancelled."),
    user: Optional[str] = typer.Option(None, "--user", "-u", help="Only this user's runs."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="How many runs, newest first."),
    db: Optional[str] = db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
) -> None:
    """List stored runs, newest first."""
    from flowforge.cli.runs_view import list_runs

    storage_call(list_runs(db, workflow, status, user, limit, as_json, out))


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help=_RUN_ID_HELP),
              db: Optional[str] = db_option(),
              as_json: bool = typer.Option(False, "--json", help="Print the record as JSON."),
              events: bool = typer.Option(False, "--events", help=(
                  "Also list every event, after the blocks (`--json` always includes "
                  "them, as `events`)."))) -> None:
    """Show a stored run: every block's inputs, output, status and timing."""
    from flowforge.cli.runs_view import show_run

    storage_call(show_run(db, run_id, as_json, events, out))


@runs_app.command("cancel")
def runs_cancel(run_id: str = typer.Argument(..., help=_RUN_ID_HELP),
                db: Optional[str] = db_option(),
                wait: float = typer.Option(10.0, "--wait", min=0,
                                           help="Seconds to wait for the run to end.")) -> None:
    """Cancel a run wherever it runs (a server, another terminal): exit 0 once it ended."""
    from flowforge.cli.runs_view import cancel_run

    ended = storage_call(cancel_run(db, run_id, wait, out))
    raise typer.Exit(0 if ended else 1)


@runs_app.command("resume")
def runs_resume(run_id: str = typer.Argument(..., help=_RUN_ID_HELP),
                db: Optional[str] = db_option(),
                as_json: bool = typer.Option(False, "--json",
                                             help="Print the RunResult as JSON."),
                imports: List[str] = typer.Option(
                    [], "--import", "-I", help="Python file or module to import first (the "
                    "functions the run's workflow calls, as with `flowforge run --import`).")
                ) -> None:
    """Finish a run that was cut off, without re-running blocks that succeeded."""
    from flowforge.service.resuming import resume

    import_plugins(imports)
    result = storage_call(resume(run_id, storage=db))
    show_result(result, as_json)


async def _on_pool(storage: Any, run_id: str) -> bool:
    """A queued run, with a broker configured: its decision sends it back to the pool."""
    import os

    from flowforge.service.pool import BROKER_ENV, born_on_pool
    return bool(os.environ.get(BROKER_ENV)) and await born_on_pool(storage, run_id)


def _decide(decision: str, run_id: str, block: str, comment: str | None, by: str | None,
            db: str | None, as_json: bool, imports: list[str]) -> None:
    import getpass

    from flowforge.cli.runs_view import find_run
    from flowforge.service.approvals import decide
    from flowforge.service.runs import RunStateError, open_storage

    import_plugins(imports)

    async def go() -> Any:
        async with open_storage(db) as storage:
            row = await find_run(storage, run_id)
            if row.get("user_id") and await storage.get_user(row["user_id"]) is not None:
                raise RunStateError(f"run {row['run_id']} belongs to the server user "
                                    f"'{row['user_id']}': decide through the server (POST "
                                    f"/api/runs/{row['run_id']}/approvals/{block}), which "
                                    f"resumes it with its owner's rights")
            if await _on_pool(storage, row["run_id"]):      # it goes on on a worker
                from flowforge.service.pool import QueuedHandle, decide_on_pool
                events = await storage.get_events(row["run_id"])
                await decide_on_pool(row["run_id"], block, decision,
                                     by=by or getpass.getuser(), comment=comment,
                                     storage=storage)
                return await QueuedHandle(storage, row["run_id"],
                                          events[-1]["seq"] if events else 0).wait()
            return await decide(row["run_id"], block, decision, by=by or getpass.getuser(),
                                comment=comment, storage=storage)

    try:
        result = storage_call(go())
    except ValueError as exc:
        fail(str(exc))
    show_result(result, as_json)


_COMMENT = typer.Option(None, "--comment", "-m", help="Why: kept with the decision.")
_BY = typer.Option(None, "--by", help="Who decides (default: your login name).")
_IMPORTS = typer.Option([], "--import", "-I", help="Python file or module to import first "
                        "(the functions the run's workflow calls).")


@runs_app.command("approve")
def runs_approve(run_id: str = typer.Argument(..., help=_RUN_ID_HELP),
                 block: str = typer.Argument(..., help="The approval block's id."),
                 comment: Optional[str] = _COMMENT, by: Optional[str] = _BY,
                 db: Optional[str] = db_option(),
                 as_json: bool = typer.Option(False, "--json", help="Print the RunResult."),
                 imports: List[str] = _IMPORTS) -> None:
    """Approve a waiting run's approval block; the run continues here (a queued
    run, with FLOWFORGE_BROKER_URL set: on a worker)."""
    _decide("approve", run_id, block, comment, by, db, as_json, imports)


@runs_app.command("reject")
def runs_reject(run_id: str = typer.Argument(..., help=_RUN_ID_HELP),
                block: str = typer.Argument(..., help="The approval block's id."),
                comment: Optional[str] = _COMMENT, by: Optional[str] = _BY,
                db: Optional[str] = db_option(),
                as_json: bool = typer.Option(False, "--json", help="Print the RunResult."),
                imports: List[str] = _IMPORTS) -> None:
    """Reject: the run goes to the block's `on_reject`, else fails."""
    _decide("reject", run_id, block, comment, by, db, as_json, imports)


@runs_app.command("resume-due")
def runs_resume_due(db: Optional[str] = db_option(),
                    every: float = typer.Option(0.0, "--every", min=0, help="Keep looking "
                                                "every this many seconds (0: look once)."),
                    imports: List[str] = _IMPORTS) -> None:
    """Resume the waiting runs whose time has come (a `wait` block's end, an
    approval's timeout); with --every, keep doing it (a resumer process).  With
    FLOWFORGE_BROKER_URL set, a run that was queued goes back to the worker
    pool instead of running here."""
    import os
    import time

    from flowforge.service.pool import BROKER_ENV
    from flowforge.service.resuming import resume_due

    import_plugins(imports)
    pool = bool(os.environ.get(BROKER_ENV))
    while True:
        stuck = 0
        if pool:
            for run_id, outcome in storage_call(_requeue_due(db)):
                stuck += outcome.startswith("still")
                (err if outcome.startswith("still") else out).print(
                    f"{run_id} {outcome}", highlight=False, markup=False)
        leave = _born_on_pool if pool else None
        for result in storage_call(resume_due(storage=db, leave=leave)):
            out.print(f"{result.run_id} {result.status}", highlight=False)
        if not every:
            if stuck:            # the broker could not be reached: say so to a cron job
                raise typer.Exit(1)
            return
        time.sleep(every)


async def _requeue_due(db: str | None) -> list[tuple[str, str]]:
    from flowforge.service.pool import requeue_due
    from flowforge.service.runs import open_storage

    async with open_storage(db) as storage:
        return await requeue_due(storage)


async def _born_on_pool(storage: Any, run_id: str) -> bool:
    """A queued run that came due after the pool's pass: the next pass sends it."""
    from flowforge.service.pool import born_on_pool
    return await born_on_pool(storage, run_id)
