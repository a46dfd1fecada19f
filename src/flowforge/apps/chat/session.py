"""One chat question in its session, the application's side: what a
question may be, what of the session goes with it, which knowledge base it
searches, what the answer is, and what of the exchange is kept.

The service (`flowforge.service.chat`, public as `flowforge.chat`) opens the
store, runs the shipped workflow (`chat.yaml`) and calls these; the CLI and
the HTTP API call the service, so they answer alike.

`kb` and `web_source` take a knowledge base name, or a folder: the folder is
kept in sync with a knowledge base named after it (unchanged files cost a
hash), so `--kb examples/policies` works on a fresh machine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from flowforge.errors import FlowforgeError, InputError
from flowforge.safe_text import shown_text
from flowforge.workflow.policy import Policy

__all__ = ["ChatAnswer", "ChatError", "HISTORY_MESSAGES", "answer_of", "chat_inputs",
           "check_base_exists", "check_session_id", "clean_question", "exchange", "history_of",
           "knowledge_base_for", "session_base", "user_key"]

#: How many earlier messages of the session are sent with a question.
HISTORY_MESSAGES = 20

_SESSION_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class ChatError(FlowforgeError):
    """The chat could not answer (the model kept skipping a mandatory tool, a
    provider failed, ...); `run_id` names the stored run with the details."""

    def __init__(self, message: str, *, run_id: str | None = None,
                 session_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.session_id = session_id


@dataclass
class ChatAnswer:
    """What `POST /api/chat/query` answers, field for field."""

    answer: str
    sources: list[dict[str, Any]]
    confidence_score: float | None
    used_internal_kb: bool
    used_external_kb: bool
    session_id: str
    run_id: str
    formatted_response: str = ""
    tool_calls: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_session_id(session_id: str) -> str:
    """`session_id`, or an InputError saying what a session id may hold."""
    if not session_id or len(session_id) > 100 or set(session_id) - _SESSION_ID_CHARS:
        raise InputError([f"session_id: invalid session id {session_id!r}: use 1-100 "
                          f"letters, digits, '-', '_' or '.'"])
    return session_id


def user_key(user: Any) -> str:
    """The id a session is stored under, for a user given as an id or a row."""
    if isinstance(user, dict):
        return str(user.get("id") or "default")
    return str(user or "default")


def clean_question(query: Any) -> str:
    """The question as it may reach the prompt, the stored session and its
    title: clean of control and bidi characters and of markup before any of
    them; an InputError when nothing is left to ask."""
    if not isinstance(query, str) or not query.strip():
        raise InputError(["query: the question is empty: ask something"])
    query = shown_text(query)
    if not query:
        raise InputError(["query: the question is empty once control characters and markup "
                          "are removed: ask it in plain text"])
    return query.strip()


def history_of(session: dict[str, Any] | None) -> list[dict[str, str]]:
    """The session's last messages as the workflow's `history` input."""
    return [{"role": m["role"], "content": m.get("content") or ""}
            for m in (session or {}).get("messages", [])
            if m.get("role") in ("user", "assistant")][-HISTORY_MESSAGES:]


def session_base(session: dict[str, Any] | None) -> str | None:
    """The knowledge base a session's last question named, if any."""
    for message in reversed((session or {}).get("messages") or []):
        if isinstance(message, dict) and isinstance(message.get("kb"), str) and message["kb"]:
            return message["kb"]
    return None


async def knowledge_base_for(source: str, *, user: Any, services: dict[str, Any] | None,
                             prefix: str = "") -> str:
    """The knowledge base name for `source`: itself, or a folder synced into a base."""
    path = Path(source).expanduser()
    if not (path.is_dir() and ("/" in source or source.startswith("."))):
        return source
    knowledge = await _knowledge(user, services)
    folder = path.resolve().name
    name = f"{prefix}{folder}"
    await knowledge.create(name, exist_ok=True)
    # mirrored as a knowledge block's `sources:` are (`knowledge.sync`), known by the
    # folder's name: the same folder given as `./docs` or from elsewhere is one source
    await knowledge.sync_paths(name, {folder: path})
    return name


async def check_base_exists(name: str, *, user: Any, services: dict[str, Any] | None) -> None:
    """NotFound, saying how to make it, when the knowledge base to search does not exist
    (else the model would be told of it, and the user only that the search failed)."""
    from flowforge.errors import NotFound

    knowledge = await _knowledge(user, services)
    try:
        await knowledge.get(name)
    except NotFound as exc:
        raise NotFound(f"{exc}; or give the chat a folder: --kb path/to/documents") from None


async def _knowledge(user: Any, services: dict[str, Any] | None) -> Any:
    from flowforge.knowledge.api import knowledge_for

    class _Caller:              # what knowledge_for reads of a block context
        pass

    caller = _Caller()
    caller.services = services or {}                        # type: ignore[attr-defined]
    caller.user = {"id": user_key(user)}                     # type: ignore[attr-defined]
    return await knowledge_for(caller)


async def chat_inputs(question: str, history: list[dict[str, str]], *, kb: str | None,
                      web_backend: str | None, web_tool: str | None, web_source: str | None,
                      user: Any, services: dict[str, Any] | None, policy: Policy,
                      require_base: bool) -> dict[str, Any]:
    """The workflow's inputs for one question.  Every name passes `policy`; a
    folder is the server's files, so without `server_files` a name is only a
    name; `require_base`: the shipped chat cannot work without its first
    base, so a missing one is NotFound before anything runs."""
    inputs: dict[str, Any] = {"query": question, "history": history}
    folders = policy.allows("server_files")
    if kb:
        policy.check_kb_id(kb, "kb_id")
        inputs["kb"] = await knowledge_base_for(kb, user=user, services=services) \
            if folders else kb
    if require_base:
        await check_base_exists(inputs.get("kb") or "default_kb", user=user, services=services)
    if web_backend:
        inputs["web_backend"] = web_backend
    if web_tool:
        inputs["web_tool"] = web_tool
    if web_source:
        policy.check_kb_id(web_source, "web_source")
        inputs["web_source"] = await knowledge_base_for(web_source, user=user,
                                                        services=services, prefix="web-") \
            if folders else web_source
    return inputs


def answer_of(result: Any, session_id: str) -> ChatAnswer:
    """The answer of a finished chat run (`result`: its RunResult), or a
    ChatError naming the run when it gave none."""
    output = result.results.get("answer") or {}
    if result.status != "succeeded" or "answer" not in output:
        record = result.blocks.get("answer")
        reason = (record.error if record is not None and record.error else result.error) \
            or f"the run ended {result.status}"
        raise ChatError(f"the chat could not answer: {reason}", run_id=result.run_id,
                        session_id=session_id)
    return ChatAnswer(
        answer=shown_text(str(output.get("answer") or "")),
        sources=list(output.get("sources") or []),
        confidence_score=output.get("confidence_score"),
        used_internal_kb=bool(output.get("used_internal_kb")),
        used_external_kb=bool(output.get("used_external_kb")),
        session_id=session_id, run_id=result.run_id,
        formatted_response=_formatted(output),
        tool_calls=[c.get("name") for c in (output.get("toolCalls") or {}).get("list", [])])


def _formatted(output: dict[str, Any]) -> str:
    """The answer tool's `formatted_response`, each line cleaned like the answer
    (an edited workflow's own tool may send anything)."""
    return "\n".join(shown_text(line) if line.strip() else ""
                     for line in str(output.get("formatted_response") or "").split("\n"))


def exchange(question: str, kb: str | None, answer: ChatAnswer) -> list[dict[str, Any]]:
    """The two messages a session keeps of one question: the question (with
    the base it named, which a follow-up that names none searches again) and
    the answer with its sources and run."""
    return [{"role": "user", "content": question, **({"kb": kb} if kb else {})},
            {"role": "assistant", "content": answer.answer, "sources": answer.sources,
             "confidence_score": answer.confidence_score,
             "used_internal_kb": answer.used_internal_kb,
             "used_external_kb": answer.used_external_kb, "run_id": answer.run_id}]
