"""One meaning per exit code, for every subcommand:

    0  done (the run succeeded)
    1  the run failed or was cancelled, something asked for does not exist,
       or the machine could not do it (the database unreachable, the
       server's port already in use)
    2  invalid input or usage: a bad document or value (a malformed
       database URL too), a name already taken
    3  the run is waiting (an approval, a long wait): only a run answers 3

Commands map flowforge's errors through `exit_code` instead of choosing a
number each, so `runs show` and `blocks show` answer "not found" alike."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from flowforge.errors import BadDatabaseURL, FlowforgeError, NotFound, RunError, StorageError
from flowforge.storage.base import AlreadyExists

__all__ = ["SUCCESS", "FAILED", "INVALID", "WAITING", "error", "exit_code", "fail", "run_exit_code",
           "run_or_exit"]

SUCCESS, FAILED, INVALID, WAITING = 0, 1, 2, 3


#: Messages are never cut or broken, and are text: markup only where a call asks for it.
_ERR = Console(stderr=True, soft_wrap=True, markup=False)


def error(message: str) -> None:
    """`error: <message>` on stderr.  The message is text, not markup: `pip
    install 'flowforge[workers]'` keeps its brackets, and so do the names and
    values a user wrote."""
    _ERR.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True)


def fail(message: str, code: int = INVALID) -> NoReturn:
    """`error: <message>` on stderr (`error`), then exit with `code`."""
    error(message)
    raise typer.Exit(code)


def run_exit_code(status: str) -> int:
    """A run's status as the exit code: 0 succeeded, 3 waiting (to be resumed),
    1 failed or cancelled."""
    return SUCCESS if status == "succeeded" else WAITING if status == "waiting" else FAILED


def exit_code(exc: BaseException) -> int:
    """1 for a failure while doing (a run, the database) or a missing thing;
    2 for everything a user wrote wrong (documents, values, names, files)."""
    if isinstance(exc, (AlreadyExists, BadDatabaseURL)):
        return INVALID
    if isinstance(exc, (NotFound, RunError, StorageError)):
        return FAILED
    return INVALID


def run_or_exit(work: Coroutine[Any, Any, Any]) -> Any:
    """What the coroutine `work` returns; a flowforge error it raises becomes
    `error: <message>` and the exit code of its meaning (`exit_code`)."""
    try:
        return asyncio.run(work)
    except FlowforgeError as exc:
        fail(str(exc), exit_code(exc))
