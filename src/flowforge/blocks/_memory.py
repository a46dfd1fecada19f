"""Conversation history for agents with a `conversation:` id.

The history of a conversation is a list of messages stored per user under
the key `conversation:<id>`: in the run's storage when the caller provides
one (`services={"storage": ...}`, as `flowforge run` and the server do), so
it survives the process; otherwise in this process only (a dict here), which
is enough for scripts and tests and is said so in the agent's docs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_history", "append_history", "MAX_STORED_MESSAGES"]

#: Older messages are dropped from the stored history beyond this many.
MAX_STORED_MESSAGES = 1000

_IN_PROCESS: dict[tuple[str, str], list[dict[str, Any]]] = {}


def _key(conversation: str) -> str:
    return f"conversation:{conversation}"


def _user_id(context: Any) -> str:
    return str((context.user or {}).get("id") or "default")


async def load_history(context: Any, conversation: str) -> list[dict[str, Any]]:
    storage = context.services.get("storage") if context.services else None
    if storage is None:
        return list(_IN_PROCESS.get((_user_id(context), conversation), []))
    stored = await storage.get_memory(_user_id(context), [_key(conversation)])
    value = stored.get(_key(conversation)) if isinstance(stored, dict) else None
    return list(value) if isinstance(value, list) else []


async def append_history(context: Any, conversation: str,
                         messages: list[dict[str, Any]]) -> None:
    history = (await load_history(context, conversation) + messages)[-MAX_STORED_MESSAGES:]
    storage = context.services.get("storage") if context.services else None
    if storage is None:
        _IN_PROCESS[(_user_id(context), conversation)] = history
    else:
        await storage.save_memory(_user_id(context), {_key(conversation): history})
