"""The tool-based RAG chat: its shipped workflow (`chat.yaml`) and its rules
for one question in a session (`session`: the question, the history sent,
the base searched, the answer, what is kept).  `flowforge.service.chat`
(public as `flowforge.chat`) stores the sessions and runs the workflow
(`ask`); the chat's tools are agent tool entries any workflow may use, so
they live with the agent block (`flowforge.blocks`), below the apps."""

from pathlib import Path

__all__ = ["CHAT_WORKFLOW"]

#: The shipped chat workflow; `flowforge chat --workflow FILE` runs an edited copy instead.
CHAT_WORKFLOW = Path(__file__).with_name("chat.yaml")
