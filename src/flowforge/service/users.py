"""Users and their API keys.

A key is `ff_` + 32 random bytes (URL-safe); only its SHA-256 is stored.  A
slow password hash (argon2, bcrypt) protects guessable secrets; a key with
256 bits of randomness cannot be guessed, and a fast hash keeps every request's
authentication a single indexed lookup.  The key is shown once, when it is
issued: it cannot be recovered from the database.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
import uuid
from typing import Any

from flowforge.errors import InvalidValue, NotFound
from flowforge.storage.base import Storage

__all__ = ["ROLES", "authenticate", "create_user", "find_user", "hash_key", "issue_key",
           "public_user"]

ROLES = ("user", "admin")
KEY_PREFIX = "ff_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}$")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


async def issue_key(storage: Storage, user_id: str) -> str:
    """A new API key for the user; returns the key itself (store nothing else)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    await storage.add_api_key({"key_id": uuid.uuid4().hex, "user_id": user_id,
                               "key_hash": hash_key(key), "prefix": key[:10],
                               "created_at": time.time()})
    return key


async def create_user(storage: Storage, name: str, role: str = "user"
                      ) -> tuple[dict[str, Any], str]:
    """Create a user with a first API key: `(user, key)`.  Raises AlreadyExists
    when the name is taken, InvalidValue for a bad name or role."""
    problems = []
    if not _NAME.match(name or ""):
        problems.append(f"name {name!r}: use 1-64 letters, digits, '_', '.', '@' or '-', "
                        f"starting with a letter or digit")
    if role not in ROLES:
        problems.append(f"role {role!r}: must be one of {', '.join(ROLES)}")
    if problems:
        raise InvalidValue("; ".join(problems))
    user = {"user_id": uuid.uuid4().hex[:16], "name": name, "role": role,
            "webhook_secret": secrets.token_hex(32), "created_at": time.time()}
    await storage.create_user(user)
    return user, await issue_key(storage, user["user_id"])


async def authenticate(storage: Storage, key: str | None) -> dict[str, Any] | None:
    """The user a key belongs to, or None for a missing, unknown or revoked key."""
    if not key or not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    return await storage.user_for_key_hash(hash_key(key))


async def find_user(storage: Storage, id_or_name: str) -> dict[str, Any]:
    user = await storage.get_user(id_or_name) or await storage.get_user_by_name(id_or_name)
    if user is None:
        raise NotFound(f"no user '{id_or_name}' (list them with `flowforge users list`)")
    return user


def public_user(user: dict[str, Any], *, with_secret: bool = False) -> dict[str, Any]:
    """A user as shown to clients: never a key; the webhook secret only to its owner."""
    shown = {"user_id": user["user_id"], "name": user["name"], "role": user["role"],
             "created_at": user["created_at"]}
    if with_secret:
        shown["webhook_secret"] = user["webhook_secret"]
    return shown
