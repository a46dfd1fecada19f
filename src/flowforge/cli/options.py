"""The database option, spelled once for every command.

Every command that reads or writes a database takes it as `--db` (the same
defaults: FLOWFORGE_DATABASE_URL, else the user data directory; `kb` its
knowledge store).  The spellings some commands used before (`--database-url`,
`--url`) still work, so scripts keep running, but no help page shows them:
a reader learns one name.

Typer cannot hide one name of an option, so the old spellings are a separate,
hidden option added to the built command (a copy of `--db`, renamed); it
passes its value on as the `db` option's default, which a `--db` given as
well overrides.
"""

from __future__ import annotations

import copy
from typing import Any

import typer

__all__ = ["DB_HELP", "HIDDEN_DB_ALIASES", "db_option", "add_db_aliases",
           "with_storage"]

DB_HELP = "Database URL (default: FLOWFORGE_DATABASE_URL or the user data directory)."

#: Older spellings of `--db`, accepted everywhere `--db` is, never shown.
HIDDEN_DB_ALIASES = ("--database-url", "--url")


def db_option(help: str = DB_HELP) -> Any:
    """The `--db` option (None: the command's default database)."""
    return typer.Option(None, "--db", help=help)


def _pass_on(ctx: Any, param: Any, value: Any) -> None:
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), "db": value}


def add_db_aliases(command: Any) -> Any:
    """Give every command of the tree that takes `--db` its hidden aliases."""
    for sub in getattr(command, "commands", {}).values():
        add_db_aliases(sub)
    params = getattr(command, "params", [])
    db = next((param for param in params if param.name == "db"), None)
    if db is not None and not any(param.name == "db_alias" for param in params):
        alias = copy.copy(db)           # typer's own option class, so its parser takes it
        alias.name, alias.opts, alias.secondary_opts = "db_alias", list(HIDDEN_DB_ALIASES), []
        alias.hidden, alias.is_eager, alias.expose_value = True, True, False
        alias.callback, alias.help = _pass_on, "The old spellings of --db."
        params.append(alias)
    return command


async def with_storage(db: str | None, action: Any) -> Any:
    """`await action(storage)` on the database `db` (the `--db` value), opened
    for it and closed after, whatever happens."""
    from flowforge.storage import storage_from_url

    storage = storage_from_url(db)
    await storage.open()
    try:
        return await action(storage)
    finally:
        await storage.close()
