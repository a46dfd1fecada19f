"""The RAG chat: the shipped workflow `chat.yaml` plus `ask` (see `session`)."""

from flowforge.apps.chat.session import (CHAT_WORKFLOW, HISTORY_MESSAGES, ChatAnswer, ChatError,
                                         ask, delete_session, get_session, list_sessions)

__all__ = ["CHAT_WORKFLOW", "HISTORY_MESSAGES", "ChatAnswer", "ChatError", "ask",
           "delete_session", "get_session", "list_sessions"]
