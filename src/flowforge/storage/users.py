"""Users and their API keys, as both back ends store them: the SQL written
once with `?` placeholders (`sql.SQLBackend`).  Only the SHA-256 of a key is
stored; a revoked key stays listed with its `revoked_at`."""

from __future__ import annotations

import time
from typing import Any

from flowforge.storage.base import KEY_FIELDS, USER_FIELDS, AlreadyExists
from flowforge.storage.sql import SQLBackend

__all__ = ["UserStore"]

_USER_COLUMNS = ", ".join(USER_FIELDS)
_KEY_COLUMNS = ", ".join(KEY_FIELDS)


class UserStore(SQLBackend):
    """Users and API keys, mixed into a back end."""

    #: The back end's error for a row whose unique key is taken.
    _unique_violation: type[Exception] = Exception

    async def create_user(self, user: dict[str, Any]) -> None:
        try:
            await self._sql_change(
                f"INSERT INTO users ({_USER_COLUMNS}) VALUES "
                f"({', '.join('?' * len(USER_FIELDS))})", [user.get(f) for f in USER_FIELDS])
        except self._unique_violation:
            raise AlreadyExists(f"a user named '{user.get('name')}' already exists "
                                f"(choose another name)") from None

    async def get_user(self, user_id: str) -> dict[str, Any] | None:
        rows = await self._sql_rows(f"SELECT {_USER_COLUMNS} FROM users WHERE user_id = ?",
                                    (user_id,))
        return rows[0] if rows else None

    async def get_user_by_name(self, name: str) -> dict[str, Any] | None:
        rows = await self._sql_rows(f"SELECT {_USER_COLUMNS} FROM users WHERE name = ?",
                                    (name,))
        return rows[0] if rows else None

    async def list_users(self) -> list[dict[str, Any]]:
        return await self._sql_rows(f"SELECT {_USER_COLUMNS} FROM users ORDER BY created_at, "
                                    f"{self._inserted_order['users']}")

    async def add_api_key(self, key: dict[str, Any]) -> None:
        await self._sql_change(
            f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES "
            f"({', '.join('?' * len(KEY_FIELDS))})", [key.get(f) for f in KEY_FIELDS])

    async def user_for_key_hash(self, key_hash: str) -> dict[str, Any] | None:
        columns = ", ".join(f"u.{f}" for f in USER_FIELDS)
        rows = await self._sql_rows(
            f"SELECT {columns} FROM api_keys k JOIN users u ON u.user_id = k.user_id "
            "WHERE k.key_hash = ? AND k.revoked_at IS NULL", (key_hash,))
        return rows[0] if rows else None

    async def list_api_keys(self, user_id: str) -> list[dict[str, Any]]:
        return await self._sql_rows(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE user_id = ? "
            f"ORDER BY created_at, {self._inserted_order['api_keys']}", (user_id,))

    async def revoke_api_key(self, key_id: str) -> bool:
        return await self._sql_change(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
            (time.time(), key_id)) > 0
