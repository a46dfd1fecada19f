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

from flowforge.cli.progress import LiveProgress
from flowforge.cli import secrets as secrets_cli, serve as serve_cli, users as users_cli
from flowforge.cli import kb as kb_cli
from flowforge.cli.exits import fail
from flowforge.cli.helptext import plain_usage, whole_short_help
from flowforge.cli.options import add_db_aliases, db_option
from flowforge.cli.plumbing import (err, import_plugins, out, parse_inputs, show_result,
                                    split_secret_inputs)
from flowforge.cli.runs import runs_app
from flowforge.errors import FlowforgeError, StorageError, WorkflowError

__all__ = ["app", "command", "main"]

# Plain click help (cli/helptext.py): wrapped, never cut, the same in a pipe.
app = typer.Typer(help="Run LLM agent workflows, offline by default.", no_args_is_help=True,
                  rich_markup_mode=None,
                  add_completion=False, pretty_exceptions_enable=False)
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
    show_result(result, as_json, stored=not no_store)


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
