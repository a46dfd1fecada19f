"""Who may do what: users' encrypted secrets and administrators' capability grants.

Both back ends run the same SQL, written once here with `?` placeholders;
each back end supplies `_sql_rows` and `_sql_change` (PostgreSQL turns the
placeholders into `%s`).  Secrets arrive here already encrypted: the storage
never sees a plaintext value, so a copied database file gives nothing away
without the server's key.

A grant's subject is `user:<user id>` or `role:<role>`.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["AccessStore", "ACCESS_TABLES"]

#: The tables, as both back ends create them (REAL is DOUBLE PRECISION's alias there).
ACCESS_TABLES = (
    """CREATE TABLE user_secrets (
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        ciphertext TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (user_id, name))""",
    """CREATE TABLE capability_grants (
        subject TEXT NOT NULL,
        capability TEXT NOT NULL,
        granted_at REAL NOT NULL,
        granted_by TEXT,
        PRIMARY KEY (subject, capability))""",
)


class AccessStore:
    """Secrets and grants, mixed into `Storage`."""

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        raise NotImplementedError

    # -- secrets ---------------------------------------------------------------
    async def put_secret(self, user_id: str, name: str, ciphertext: str) -> None:
        """Create or replace one secret of a user (the value already encrypted)."""
        now = time.time()
        await self._sql_change(
            "INSERT INTO user_secrets VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, name) "
            "DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
            (user_id, name, ciphertext, now, now))

    async def secret_ciphertexts(self, user_id: str) -> dict[str, str]:
        rows = await self._sql_rows("SELECT name, ciphertext FROM user_secrets WHERE user_id = ?",
                                    (user_id,))
        return {row["name"]: row["ciphertext"] for row in rows}

    async def list_secrets(self, user_id: str) -> list[dict[str, Any]]:
        """Names and times only: no value, encrypted or not, leaves through here."""
        return await self._sql_rows(
            "SELECT name, created_at, updated_at FROM user_secrets WHERE user_id = ? "
            "ORDER BY name", (user_id,))

    async def delete_secret(self, user_id: str, name: str) -> bool:
        return bool(await self._sql_change(
            "DELETE FROM user_secrets WHERE user_id = ? AND name = ?", (user_id, name)))

    # -- grants ----------------------------------------------------------------
    async def add_grant(self, subject: str, capability: str, granted_by: str | None = None
                        ) -> bool:
        """True when the grant is new (granting twice changes nothing)."""
        return bool(await self._sql_change(
            "INSERT INTO capability_grants VALUES (?, ?, ?, ?) "
            "ON CONFLICT (subject, capability) DO NOTHING",
            (subject, capability, time.time(), granted_by)))

    async def remove_grant(self, subject: str, capability: str) -> bool:
        return bool(await self._sql_change(
            "DELETE FROM capability_grants WHERE subject = ? AND capability = ?",
            (subject, capability)))

    async def list_grants(self, subjects: list[str] | None = None) -> list[dict[str, Any]]:
        if subjects is None:
            return await self._sql_rows(
                "SELECT * FROM capability_grants ORDER BY subject, capability")
        if not subjects:
            return []
        marks = ", ".join("?" * len(subjects))
        return await self._sql_rows(
            f"SELECT * FROM capability_grants WHERE subject IN ({marks}) "
            f"ORDER BY subject, capability", tuple(subjects))
