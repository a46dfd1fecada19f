"""The RAG chat's shipped workflow; `flowforge.service.chat` runs it (`ask`)."""

from pathlib import Path

__all__ = ["CHAT_WORKFLOW"]

#: The shipped chat workflow; `flowforge chat --workflow FILE` runs an edited copy instead.
CHAT_WORKFLOW = Path(__file__).with_name("chat.yaml")
