"""`flowforge users`: create users and their API keys, list, revoke; grant
capabilities to users or roles.

A key is printed once, alone on the last line, so a script can capture it
with `tail -n 1`; only its hash is stored."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer
from rich.console import Console

from flowforge.cli.exits import fail, run_or_exit
from flowforge.cli.options import db_option, with_storage

__all__ = ["users_app", "register"]

users_app = typer.Typer(help="Users of the server and their API keys.", no_args_is_help=True)
out = Console(markup=False)

DbOption = db_option()


@users_app.command("create")
def create(name: str = typer.Argument(..., help="A unique user name."),
           admin: bool = typer.Option(False, "--admin", help="May see every user's runs."),
           db: Optional[str] = DbOption) -> None:
    """Create a user and print their API key (once: it cannot be shown again)."""
    from flowforge.service.users import create_user

    user, key = run_or_exit(with_storage(db, lambda s: create_user(
        s, name, "admin" if admin else "user")))
    out.print(f"created {user['role']} '{user['name']}' (id {user['user_id']})",
              highlight=False)
    out.print("API key (shown once; send it as `Authorization: Bearer <key>`):",
              highlight=False)
    print(key)


@users_app.command("key")
def new_key(name: str = typer.Argument(..., help="User name or id."),
            db: Optional[str] = DbOption) -> None:
    """Issue another API key for a user (printed once, on the last line)."""
    from flowforge.service.users import find_user, issue_key

    async def action(storage: Any) -> tuple[dict, str]:
        user = await find_user(storage, name)
        return user, await issue_key(storage, user["user_id"])

    user, key = run_or_exit(with_storage(db, action))
    out.print(f"new API key for '{user['name']}' (shown once):", highlight=False)
    print(key)


@users_app.command("list")
def list_users(db: Optional[str] = DbOption,
               as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Users with their keys (prefixes only)."""
    from flowforge.service.users import public_user

    async def action(storage: Any) -> list[dict]:
        users = []
        for user in await storage.list_users():
            keys = await storage.list_api_keys(user["user_id"])
            users.append({**public_user(user), "keys": [
                {"key_id": k["key_id"], "prefix": k["prefix"],
                 "revoked": k["revoked_at"] is not None} for k in keys]})
        return users

    users = run_or_exit(with_storage(db, action))
    if as_json:
        print(json.dumps(users))
        return
    for user in users:
        live = [k["prefix"] + "…" for k in user["keys"] if not k["revoked"]]
        out.print(f"{user['name']:<20} {user['role']:<6} {user['user_id']}  keys: "
                  f"{', '.join(live) or 'none'}", highlight=False)


@users_app.command("revoke")
def revoke(prefix: str = typer.Argument(..., help="A key's first characters (as listed) "
                                                  "or its key id."),
           db: Optional[str] = DbOption) -> None:
    """Revoke an API key: requests with it answer 401 from then on."""

    async def action(storage: Any) -> list[str]:
        matches = []
        for user in await storage.list_users():
            for key in await storage.list_api_keys(user["user_id"]):
                if key["revoked_at"] is None and (key["key_id"] == prefix or
                                                  key["prefix"].startswith(prefix[:10]) and
                                                  len(prefix) >= 6):
                    matches.append(key["key_id"])
        if len(matches) == 1:
            await storage.revoke_api_key(matches[0])
        return matches

    if len(prefix) < 6:
        fail(f"{prefix!r} is too short to name one key: give at least "
             f"6 characters of a key as `flowforge users list` shows it (ff_…), or the "
             f"key id from `flowforge users list --json`", 2)
    matches = run_or_exit(with_storage(db, action))
    if len(matches) != 1:
        fail(f"{len(matches)} live keys match {prefix!r}: give "
             f"the key id from `flowforge users list --json`", 1)
    out.print(f"revoked key {matches[0]}")


_CAPABILITY_HELP = ("A capability: local_commands, server_files, server_env, "
                    "provider_endpoints or private_network.")


async def _subject(storage: Any, target: str) -> tuple[str, str]:
    from flowforge.service.grants import subject_of
    from flowforge.service.users import find_user

    if target.startswith("role:"):
        return subject_of(role=target[5:]), f"role '{target[5:]}'"
    user = await find_user(storage, target)
    return subject_of(user), f"user '{user['name']}'"


_TARGET_HELP = "User name or id, or role:user / role:admin for every user of that role."


@users_app.command("grant")
def grant_capability(target: str = typer.Argument(..., help=_TARGET_HELP),
                     capability: str = typer.Argument(..., help=_CAPABILITY_HELP),
                     db: Optional[str] = DbOption) -> None:
    """Let a user's (or a role's) workflows use a capability on the server."""
    from flowforge.service.grants import grant

    async def action(storage: Any) -> tuple[str, bool]:
        subject, shown = await _subject(storage, target)
        return shown, await grant(storage, subject, capability, by="cli")

    shown, new = run_or_exit(with_storage(db, action))
    out.print(f"granted {capability} to {shown}" if new else
              f"{shown} already had {capability}", highlight=False)


@users_app.command("ungrant")
def ungrant_capability(target: str = typer.Argument(..., help=_TARGET_HELP),
                       capability: str = typer.Argument(..., help=_CAPABILITY_HELP),
                       db: Optional[str] = DbOption) -> None:
    """Take a capability back (runs already started keep what they had)."""
    from flowforge.service.grants import revoke

    async def action(storage: Any) -> tuple[str, bool]:
        subject, shown = await _subject(storage, target)
        return shown, await revoke(storage, subject, capability)

    shown, found = run_or_exit(with_storage(db, action))
    if not found:
        fail(f"{shown} has no grant of {capability}", 1)
    out.print(f"{shown} no longer has {capability}", highlight=False)


@users_app.command("grants")
def list_grants(db: Optional[str] = DbOption,
                as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every grant, and what each capability allows."""
    from flowforge.workflow.policy import CAPABILITIES

    async def action(storage: Any) -> list[dict]:
        names = {u["user_id"]: u["name"] for u in await storage.list_users()}
        rows = await storage.list_grants()
        for row in rows:
            kind, _, ident = row["subject"].partition(":")
            row["shown"] = f"user {names.get(ident, ident)}" if kind == "user" else \
                f"role {ident}"
        return rows

    rows = run_or_exit(with_storage(db, action))
    if as_json:
        print(json.dumps(rows))
        return
    for row in rows:
        out.print(f"{row['shown']:<24} {row['capability']}", highlight=False)
    if not rows:
        out.print("no grants: on a server, documents may reach nothing of the host "
                  "(admins have every capability)", highlight=False)
    out.print("\ncapabilities:", highlight=False)
    for name, what in CAPABILITIES.items():
        out.print(f"  {name:<20} {what}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")
