"""The RAG chat's sessions: each user's conversations, kept in the run
storage (SQLite or PostgreSQL) so they survive the process and can be
listed and deleted through the API and the CLI.

A session is its messages in order (`{role, content, ...}`; an assistant
message also carries its sources, flags and run id), a title (the first
question, shown as every text shown to people is: `flowforge.safe_text`) and
its times.  Every method takes the user: one user's session
id is invisible to another, whatever the id.

Both back ends run the same SQL, written once here with `?` placeholders
(as `access.AccessStore` does); times are DOUBLE PRECISION, which SQLite
reads as REAL and PostgreSQL keeps to the microsecond (its REAL would not).
"""

from __future__ import annotations

import json
import time
from typing import Any

from flowforge.safe_text import shown_text

__all__ = ["ChatSessionStore", "CHAT_TABLES", "MAX_SESSION_MESSAGES"]

#: Older messages are dropped beyond this many (the newest are what the model reads).
MAX_SESSION_MESSAGES = 1000

CHAT_TABLES = (
    """CREATE TABLE chat_sessions (
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        title TEXT NOT NULL,
        messages TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (user_id, session_id))""",
)


class ChatSessionStore:
    """Chat sessions, mixed into `Storage`."""

    async def _sql_rows(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def _sql_change(self, sql: str, args: Any = ()) -> int:
        raise NotImplementedError

    async def chat_session(self, user_id: str, session_id: str) -> dict[str, Any] | None:
        rows = await self._sql_rows(
            "SELECT session_id, title, messages, message_count, created_at, updated_at "
            "FROM chat_sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id))
        if not rows:
            return None
        row = dict(rows[0])
        row["messages"] = json.loads(row["messages"])
        return row

    async def append_chat_messages(self, user_id: str, session_id: str,
                                   messages: list[dict[str, Any]], *, title: str = "") -> None:
        """Add messages to a session, creating it (titled `title`) when new."""
        now = time.time()
        found = await self.chat_session(user_id, session_id)
        kept = ((found or {}).get("messages") or []) + list(messages)
        kept = kept[-MAX_SESSION_MESSAGES:]
        text = json.dumps(kept, ensure_ascii=False, default=str)
        if found is None:
            await self._sql_change(
                "INSERT INTO chat_sessions VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (user_id, session_id) DO UPDATE SET messages = excluded.messages, "
                "message_count = excluded.message_count, updated_at = excluded.updated_at",
                (user_id, session_id, (shown_text(title) or "chat")[:200], text, len(kept),
                 now, now))
        else:
            await self._sql_change(
                "UPDATE chat_sessions SET messages = ?, message_count = ?, updated_at = ? "
                "WHERE user_id = ? AND session_id = ?",
                (text, len(kept), now, user_id, session_id))

    async def list_chat_sessions(self, user_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """Newest first, without the messages."""
        return await self._sql_rows(
            "SELECT session_id, title, message_count, created_at, updated_at FROM chat_sessions "
            "WHERE user_id = ? ORDER BY updated_at DESC, session_id LIMIT ?",
            (user_id, int(limit)))

    async def delete_chat_session(self, user_id: str, session_id: str) -> bool:
        return bool(await self._sql_change(
            "DELETE FROM chat_sessions WHERE user_id = ? AND session_id = ?",
            (user_id, session_id)))
