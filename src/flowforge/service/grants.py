"""Capability grants: what an administrator lets a user's documents do on a server.

A grant names a user (`flowforge users grant alice server_files`) or a role
(`--role user`: every user of that role).  Users with the `admin` role have
every capability: they are the server's administrators, and could grant
themselves any of them anyway.  The capabilities themselves are listed in
`flowforge.workflow.policy.CAPABILITIES`.
"""

from __future__ import annotations

from typing import Any

from flowforge.errors import InvalidValue
from flowforge.hints import did_you_mean
from flowforge.service.users import ROLES
from flowforge.storage.base import Storage
from flowforge.workflow.policy import CAPABILITIES, Policy

__all__ = ["check_capability", "grant", "revoke", "grants_of", "policy_for", "subject_of"]


def check_capability(name: str) -> str:
    if name not in CAPABILITIES:
        hint = did_you_mean(name, CAPABILITIES, 0.5)
        raise InvalidValue(f"unknown capability {name!r}{hint}; capabilities: "
                           f"{', '.join(CAPABILITIES)}")
    return name


def subject_of(user: dict[str, Any] | None = None, role: str | None = None) -> str:
    if role is not None:
        if role not in ROLES:
            raise InvalidValue(f"role {role!r}: must be one of {', '.join(ROLES)}")
        return f"role:{role}"
    assert user is not None
    return f"user:{user['user_id']}"


async def grant(storage: Storage, subject: str, capability: str, by: str | None = None) -> bool:
    """True when the grant is new."""
    return await storage.add_grant(subject, check_capability(capability), by)


async def revoke(storage: Storage, subject: str, capability: str) -> bool:
    """True when there was such a grant."""
    return await storage.remove_grant(subject, check_capability(capability))


async def grants_of(storage: Storage, user: dict[str, Any]) -> set[str]:
    """The capabilities a user has: their own grants and their role's."""
    if user.get("role") == "admin":
        return set(CAPABILITIES)
    rows = await storage.list_grants([subject_of(user), subject_of(role=user.get("role",
                                                                                  "user"))])
    return {row["capability"] for row in rows if row["capability"] in CAPABILITIES}


async def policy_for(storage: Storage, user: dict[str, Any], *,
                     shared_keys: bool = False) -> Policy:
    """The policy a server applies to this user's documents and requests:
    their grants, whether the server shares its provider keys with them
    (`shared_keys`), and the names of their secrets (their own keys)."""
    secrets = await storage.list_secrets(user["user_id"]) if user.get("user_id") else []
    return Policy(await grants_of(storage, user), subject=user.get("name", ""),
                  shared_keys=shared_keys,
                  own_keys={row["name"] for row in secrets if row.get("name")})
