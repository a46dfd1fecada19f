"""`flowforge secrets`: a user's secrets, stored encrypted, read by their runs
as `{{secrets.NAME}}` (and by model providers under their own name).

A value is never taken from the command line (it would land in the shell's
history and the process list): it is asked for without echo, or read from
standard input when that is not a terminal (`printenv KEY | flowforge
secrets set KEY`).  No command prints a value back."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer

from flowforge.cli.exits import fail, run_or_exit
from flowforge.cli.options import with_storage
from flowforge.cli.users import DbOption, out
from flowforge.errors import InvalidValue

__all__ = ["secrets_app", "register"]

secrets_app = typer.Typer(help="Your secrets: encrypted, used by your runs as "
                               "{{secrets.NAME}}.", no_args_is_help=True)

UserOption = typer.Option("default", "--user", "-u",
                          help="Whose secrets: a server user's name or id, or the local user "
                               "id runs use (`flowforge run --user`; default: default).")


async def _user_id(storage: Any, user: str) -> str:
    """A server user's id when `user` names one, else `user` as the local user id."""
    row = await storage.get_user(user) or await storage.get_user_by_name(user)
    return row["user_id"] if row else user


def _read_value(name: str) -> str:
    if sys.stdin.isatty():
        return typer.prompt(f"value of {name}", hide_input=True)
    value = sys.stdin.read()
    return value[:-1] if value.endswith("\n") else value


@secrets_app.command("set")
def set_secret(name: str = typer.Argument(..., help="Secret name, e.g. OPENAI_API_KEY."),
               user: str = UserOption, db: Optional[str] = DbOption) -> None:
    """Store a secret (asked for without echo, or read from standard input)."""
    from flowforge.service.secrets import check_secret_name, set_secret as store

    try:
        check_secret_name(name)
    except InvalidValue as exc:
        fail(str(exc), 2)
    value = _read_value(name)

    async def action(storage: Any) -> None:
        await store(storage, await _user_id(storage, user), name, value)

    run_or_exit(with_storage(db, action))
    out.print(f"stored secret {name} for {user} (encrypted)", highlight=False)


@secrets_app.command("list")
def list_secrets(user: str = UserOption, db: Optional[str] = DbOption,
                 as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Secret names and when they were set (never their values)."""
    from flowforge.service.secrets import list_secrets as names

    async def action(storage: Any) -> list[dict]:
        return await names(storage, await _user_id(storage, user))

    rows = run_or_exit(with_storage(db, action))
    if as_json:
        print(json.dumps(rows))
        return
    for row in rows:
        out.print(row["name"], highlight=False)
    if not rows:
        out.print(f"no secrets for {user}", highlight=False)


@secrets_app.command("delete")
def delete_secret(name: str = typer.Argument(..., help="Secret name."),
                  user: str = UserOption, db: Optional[str] = DbOption) -> None:
    """Delete a secret."""
    from flowforge.service.secrets import delete_secret as remove

    async def action(storage: Any) -> None:
        await remove(storage, await _user_id(storage, user), name)

    run_or_exit(with_storage(db, action))
    out.print(f"deleted secret {name}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(secrets_app, name="secrets")
