"""The `flowforge` command: parse, call the service, render. Nothing else.

Exit codes are part of the interface: 0 the run succeeded, 1 it failed or
was cancelled, 2 the workflow or the command line is invalid, 3 the run is
waiting (an approval, a long wait: `flowforge runs approve|reject|resume-due`
continues it).  `--json`
prints the RunResult and nothing else on stdout, so scripts can pipe it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console

from flowforge.cli.progress import LiveProgress, print_summary
from flowforge.cli import secrets as secrets_cli, serve as serve_cli, users as users_cli
from flowforge.cli import kb as kb_cli
from flowforge.cli.exits import fail, run_exit_code
from flowforge.cli.helptext import plain_usage, whole_short_help
from flowforge.cli.options import add_db_aliases, db_option
from flowforge.errors import FlowforgeError, StorageError, WorkflowError

__all__ = ["app", "command", "main"]

# Plain click help (cli/helptext.py): wrapped, never cut, the same in a pipe.
app = typer.Typer(help="Run LLM agent workflows, offline by default.", no_args_is_help=True,
                  rich_markup_mode=None,
                  add_completion=False, pretty_exceptions_enable=False)
runs_app = typer.Typer(help="Stored runs: list, show, cancel, approve or reject, resume.",
                       no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(kb_cli.kb_app, name="kb")           # `flowforge kb ...` (knowledge bases)
from flowforge.cli import blocks as blocks_cli, build as build_cli  # noqa: E402
from flowforge.cli import chat as chat_cli, worker as worker_cli  # noqa: E402
from flowforge.cli import research as research_cli  # noqa: E402
app.add_typer(blocks_cli.blocks_app, name="blocks")  # `flowforge blocks ...` (block registry)
build_cli.register(app)                               # `flowforge build "..."` (the thinker)
chat_cli.register(app)                                # `flowforge chat` (the RAG chat)
research_cli.register(app)                            # `flowforge research "..."`
worker_cli.register(app)                              # `flowforge worker` (the pool)
from flowforge.cli import formats as formats_cli  # noqa: E402
for _commands in (serve_cli, users_cli, secrets_cli, formats_cli):  # serve, users, secrets,
    _commands.register(app)                                       # import, export

out = Console(markup=False)
err = Console(stderr=True, soft_wrap=True, markup=False)   # long messages are never cut or broken


def parse_inputs(pairs: list[str], inputs_file: Path | None) -> dict[str, Any]:
    """`k=v` pairs (each value JSON when it parses as JSON, else a string;
    `k=@path` the text of a file, `k=@@text` the text `@text`) over an
    optional JSON/YAML file of inputs."""
    values: dict[str, Any] = {}
    if inputs_file is not None:
        from flowforge.workflow.loader import parse_text
        try:
            data = parse_text(inputs_file.read_text(encoding="utf-8"), str(inputs_file))
        except FileNotFoundError:
            fail(f"--inputs-file: no such file: {inputs_file}")
        except IsADirectoryError:
            fail(f"--inputs-file {inputs_file} is a directory: give a JSON or YAML file")
        except UnicodeDecodeError:
            fail(f"--inputs-file {inputs_file} is not UTF-8 text: give a JSON or YAML file")
        except OSError as exc:
            fail(f"--inputs-file {inputs_file}: {exc.strerror or exc}")
        except WorkflowError as exc:
            fail(f"--inputs-file {exc}")
        if data is None:
            fail(f"--inputs-file {inputs_file} is empty: write a mapping such as "
                 f"{{\"query\": \"refund policy\"}}")
        if not isinstance(data, dict):
            fail(f"--inputs-file {inputs_file}: expected a mapping of input names to values, "
                 f"got {type(data).__name__}")
        values.update(data)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--input {pair!r}: write it as name=value, e.g. --input query='refund policy'")
        if raw.startswith("@@"):
            value: Any = raw[1:]
        elif raw.startswith("@"):
            value = _file_input(key.strip(), raw[1:])
        else:
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
        values[key.strip()] = value
    return values


def _file_input(name: str, path_text: str) -> str:
    """The text of the file an `--input name=@path` names (as is: never JSON-parsed)."""
    path = Path(path_text).expanduser()
    hint = f" (to pass text starting with @, write --input {name}=@@...)"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"--input {name}=@{path_text}: no such file{hint}")
    except IsADirectoryError:
        fail(f"--input {name}=@{path_text} is a directory: give a text file")
    except UnicodeDecodeError:
        fail(f"--input {name}=@{path_text} is not UTF-8 text")
    except OSError as exc:
        fail(f"--input {name}=@{path_text}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


def split_secret_inputs(workflow: Any, inputs: dict[str, Any]
                        ) -> tuple[dict[str, Any], dict[str, str]]:
    """Inputs the workflow reads as `{{secrets.NAME}}` and does not declare
    (a prompt-chain's `{apiKey}`) are passed as secrets for this run: hidden
    from every record and never stored."""
    from flowforge.apps.chains import split_variables

    declared = workflow.doc.inputs
    rest, hidden = split_variables(workflow, {k: v for k, v in inputs.items()
                                              if k not in declared})
    return {**{k: v for k, v in inputs.items() if k in declared}, **rest}, hidden


def import_plugins(targets: list[str]) -> None:
    """Import user code (functions, block types, providers) before running."""
    import importlib
    import importlib.util

    for target in targets:
        path = Path(target)
        try:
            if path.suffix == ".py":
                if not path.exists():
                    fail(f"--import {target}: no such file")
                spec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(target)
        except typer.Exit:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: report, do not trace
            fail(f"--import {target} failed: {type(exc).__name__}: {exc}")


@app.command("run")
def run_command(
    file: Path = typer.Argument(..., help="Workflow file (YAML or JSON)."),
    input: List[str] = typer.Option([], "--input", "-i", help="An input as name=value (repeatable)."),
    inputs_file: Optional[Path] = typer.Option(None, "--inputs-file", help="JSON/YAML file of inputs."),
    model: Optional[str] = typer.Option(None, "--model", "-m",
                                        help="Model for every LLM block, e.g. openai/gpt-4o."),
    as_json: bool = typer.Option(False, "--json", help="Print the RunResult as JSON, nothing else."),
    user: str = typer.Option("default", "--user", "-u", help="User id (per-user memory)."),
    db: Optional[str] = db_option(),
    no_store: bool = typer.Option(False, "--no-store", help="Do not record the run."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1,
                                              help="Blocks running at once (default: the workflow's)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress view."),
    imports: List[str] = typer.Option([], "--import", "-I",
                                      help="Python file or module to import first, e.g. one "
                                           "registering @flowforge.function callables."),
    queue: bool = typer.Option(False, "--queue", help="Run it on the worker pool "
                               "(FLOWFORGE_BROKER_URL; `flowforge worker`) and follow it."),
    broker: Optional[str] = typer.Option(None, "--broker", help="With --queue: the broker "
                                         "URL (default: FLOWFORGE_BROKER_URL)."),
) -> None:
    """Run a workflow and show its blocks live."""
    from flowforge.service.loading import load
    from flowforge.service.runs import run

    import_plugins(imports)
    inputs = parse_inputs(input, inputs_file)
    if model is not None:
        from flowforge.service.loading import model_problem
        problem = model_problem(model, "--model")
        if problem is not None:
            fail(str(problem))
    try:
        workflow = load(file)
    except WorkflowError as exc:
        fail(str(exc))
    inputs, run_secrets = split_secret_inputs(workflow, inputs)
    from flowforge.apps.chains import agent_keys
    run_secrets = {**agent_keys(file), **run_secrets}    # keys written in an Agent file
    if queue:
        if no_store:
            fail("--queue needs the run storage (workers read the run from it): drop "
                 "--no-store")
        from flowforge.cli.worker import run_on_queue
        raise typer.Exit(run_on_queue(workflow, inputs, user=user, model=model, db=db,
                                      broker=broker, as_json=as_json, quiet=quiet))
    progress = None if (as_json or quiet) else LiveProgress(workflow, err)
    try:
        if progress:
            progress.start()
        try:
            result = asyncio.run(run(workflow, inputs, user=user, model=model,
                                     storage=False if no_store else db, concurrency=concurrency,
                                     on_event=progress.on_event if progress else None,
                                     run_secrets=run_secrets or None))
        finally:
            if progress:
                progress.stop()
    except KeyboardInterrupt:
        fail("interrupted", 1)
    except StorageError as exc:
        from flowforge.cli.exits import exit_code
        fail(str(exc), exit_code(exc))
    except FlowforgeError as exc:
        fail(str(exc))
    if result.status == "failed" and not result.blocks and result.error:
        # Nothing ran: the inputs were rejected before the first block.
        if as_json:
            print(json.dumps(result.to_dict(), default=str))
        fail(result.error, 2)
    _show_result(result, as_json, stored=not no_store)


@app.command("validate")
def validate_command(file: Path = typer.Argument(..., help="Workflow file (YAML or JSON)."),
                     imports: List[str] = typer.Option(
                         [], "--import", "-I", help="Python file or module to import first, "
                         "as `flowforge run --import` does: the functions the workflow calls "
                         "must be registered.")) -> None:
    """Check a workflow without running it; lists every problem with its place
    (models included: a provider key missing from this environment is one; so are
    functions no `--import` registered, and a knowledge filter no document of its
    existing base can match)."""
    from rich.markup import escape

    from flowforge.errors import ValidationFailed
    from flowforge.service.knowledge_check import knowledge_filter_problems
    from flowforge.service.loading import function_problems, key_problems, load
    from flowforge.workflow.joins import join_warnings

    import_plugins(imports)
    try:
        compiled = load(file)
        problems = asyncio.run(key_problems(compiled, {**compiled.doc.env, **os.environ}))
        problems += asyncio.run(function_problems(compiled))
        problems += asyncio.run(knowledge_filter_problems(compiled))
        if problems:
            raise ValidationFailed(problems, source=str(file))
    except WorkflowError as exc:
        fail(str(exc))
    for warning in compiled.graph.warnings:
        err.print(f"[yellow]warning:[/] {escape(f'{file}: {warning}')}", highlight=False,
                  markup=True)
    count = sum(1 for _ in compiled.doc.iter_blocks())
    out.print(f"[green]ok[/] {escape(str(file))}: workflow '{compiled.id}', {count} block(s)",
              markup=True, soft_wrap=True)           # a long path is not broken in two
    for warning in join_warnings(compiled.graph):
        err.print(f"[yellow]warning:[/] {escape(f'{file}: {warning}')}", highlight=False,
                  markup=True)


@app.command("schema")
def schema_command(output: Optional[Path] = typer.Option(None, "--output", "-o",
                                                         help="Write to a file instead of stdout.")) -> None:
    """Print the JSON Schema of the workflow format (for editor autocomplete)."""
    from flowforge.service.schema import workflow_json_schema

    text = json.dumps(workflow_json_schema(), indent=2)
    if output:
        output.write_text(text + "\n", encoding="utf-8")
        err.print(f"wrote {output}")
    else:
        print(text)


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

    _storage_call(list_runs(db, workflow, status, user, limit, as_json, out))


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help=_RUN_ID_HELP),
              db: Optional[str] = db_option(),
              as_json: bool = typer.Option(False, "--json", help="Print the record as JSON."),
              events: bool = typer.Option(False, "--events", help=(
                  "Also list every event, after the blocks (`--json` always includes "
                  "them, as `events`)."))) -> None:
    """Show a stored run: every block's inputs, output, status and timing."""
    from flowforge.cli.runs_view import show_run

    _storage_call(show_run(db, run_id, as_json, events, out))


@runs_app.command("cancel")
def runs_cancel(run_id: str = typer.Argument(..., help=_RUN_ID_HELP),
                db: Optional[str] = db_option(),
                wait: float = typer.Option(10.0, "--wait", min=0,
                                           help="Seconds to wait for the run to end.")) -> None:
    """Cancel a run wherever it runs (a server, another terminal): exit 0 once it ended."""
    from flowforge.cli.runs_view import cancel_run

    ended = _storage_call(cancel_run(db, run_id, wait, out))
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
    result = _storage_call(resume(run_id, storage=db))
    _show_result(result, as_json)


def _show_result(result: Any, as_json: bool, stored: bool = True) -> None:
    if as_json:
        from flowforge.service.recorder import CUT_OFF

        print(json.dumps(result.to_dict(), default=str, ensure_ascii=False))
        if result.status == "failed" and (result.error or "").startswith(CUT_OFF):
            err.print(f"error: {result.error}", highlight=False, markup=False)
    else:
        print_summary(result, out, stored=stored)
        if result.status == "waiting":
            waiting = [bid for bid, record in result.blocks.items()
                       if record.status == "waiting"]
            err.print(f"run {result.run_id} is waiting on {', '.join(waiting)}: "
                      f"`flowforge runs approve|reject {result.run_id} BLOCK` decides an "
                      f"approval; `flowforge runs resume-due` continues what is due",
                      highlight=False, markup=False)
    raise typer.Exit(run_exit_code(result.status))


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
        result = _storage_call(go())
    except ValueError as exc:
        fail(str(exc))
    _show_result(result, as_json)


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
            for run_id, outcome in _storage_call(_requeue_due(db)):
                stuck += outcome.startswith("still")
                (err if outcome.startswith("still") else out).print(
                    f"{run_id} {outcome}", highlight=False, markup=False)
        leave = _born_on_pool if pool else None
        for result in _storage_call(resume_due(storage=db, leave=leave)):
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


def _storage_call(coro: Any) -> Any:
    from flowforge.cli.exits import exit_code

    try:
        return asyncio.run(coro)
    except FlowforgeError as exc:
        fail(str(exc), exit_code(exc))


def command() -> Any:
    """The click command `flowforge` is: the typer app with the hidden old
    spellings of `--db` and every command's whole first paragraph as its short
    help.  `main` runs it; tests invoke the same object in-process."""
    return plain_usage(whole_short_help(add_db_aliases(typer.main.get_command(app))))


def main() -> None:
    import logging

    # The pool's reconnect attempts while a database is away log a multi-line
    # warning each; flowforge says in one line what that means for the run.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    try:
        command()(prog_name="flowforge")
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
