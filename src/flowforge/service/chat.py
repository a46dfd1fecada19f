"""The RAG chat as a service: one question end to end - the session's history
in, the shipped workflow (`flowforge/apps/chat/chat.yaml`) run on the engine,
the exchange stored, the answer out.

This is the whole of the chat's code beyond its workflow file and its tools:
the CLI, the HTTP API and Python all call `ask`, so they answer alike.

    import flowforge
    answer = await flowforge.chat.ask("How long is the warranty?", kb="policies")
    answer.answer, answer.sources, answer.session_id, answer.run_id

`kb` and `web_source` take a knowledge base name, or a folder: the folder is
kept in sync with a knowledge base named after it (unchanged files cost a
hash), so `--kb examples/policies` works on a fresh machine.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from flowforge.apps.chat import CHAT_WORKFLOW
from flowforge.errors import FlowforgeError, InputError
from flowforge.safe_text import shown_text
from flowforge.service.runs import open_storage, start_run
from flowforge.workflow.policy import TRUSTED, Policy

__all__ = ["CHAT_WORKFLOW", "ChatAnswer", "ChatError", "ask", "check_base", "knowledge_base_for",
           "list_sessions", "get_session", "delete_session", "session_base",
           "HISTORY_MESSAGES"]

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


_COMPILED: dict[tuple[str, int, int], Any] = {}


def _compiled(workflow: str | Path) -> Any:
    """The chat workflow, parsed and checked once per file version (not per question)."""
    from flowforge.service.loading import load

    path = Path(workflow)
    try:
        stat = path.stat()
    except OSError:
        return load(path)                   # load says what is wrong with it
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = load(path)
        if len(_COMPILED) > 32:
            _COMPILED.pop(next(iter(_COMPILED)))
    return found


def _check_session_id(session_id: str) -> str:
    if not session_id or len(session_id) > 100 or set(session_id) - _SESSION_ID_CHARS:
        raise InputError([f"session_id: invalid session id {session_id!r}: use 1-100 "
                          f"letters, digits, '-', '_' or '.'"])
    return session_id


async def knowledge_base_for(source: str, *, user: Any, services: dict[str, Any] | None,
                             prefix: str = "") -> str:
    """The knowledge base name for `source`: itself, or a folder synced into a base."""
    path = Path(source).expanduser()
    if not (path.is_dir() and ("/" in source or source.startswith("."))):
        return source
    knowledge = await _knowledge(user, services)
    name = f"{prefix}{path.resolve().name}"
    await knowledge.create(name, exist_ok=True)
    await knowledge.add_paths(name, [path])
    return name


async def _check_base(name: str, *, user: Any, services: dict[str, Any] | None) -> None:
    """NotFound, saying how to make it, when the knowledge base to search does not exist
    (else the model would be told of it, and the user only that the search failed)."""
    from flowforge.errors import NotFound

    knowledge = await _knowledge(user, services)
    try:
        await knowledge.get(name)
    except NotFound as exc:
        raise NotFound(f"{exc}; or give the chat a folder: --kb path/to/documents") from None


async def check_base(*, kb: str | None = None, session_id: str | None = None,
                     user: str | dict[str, Any] | None = None, storage: Any = None,
                     services: dict[str, Any] | None = None, policy: Policy = TRUSTED,
                     workflow: str | Path | None = None) -> None:
    """Refuse, as `ask` would before its run, a question whose knowledge base does
    not exist (NotFound) or may not be named (the policy's error): what the
    streaming route calls before it starts a stream, so a missing base is the
    same 404 on both routes rather than an error event inside a 200."""
    if workflow is not None:
        return
    if session_id:
        async with open_storage(storage) as opened:
            found = await opened.chat_session(_user_id(user), _check_session_id(session_id)) \
                if opened is not None else None
        kb = kb or session_base(found)
    if kb:
        policy.check_kb_id(kb, "kb_id")
        path = Path(kb).expanduser()
        if policy.allows("server_files") and path.is_dir() and ("/" in kb or kb.startswith(".")):
            return                  # a folder: `ask` makes its base
    await _check_base(kb or "default_kb", user=user, services=services)


async def _knowledge(user: Any, services: dict[str, Any] | None) -> Any:
    from flowforge.knowledge.api import knowledge_for

    class _Caller:              # what knowledge_for reads of a block context
        pass

    caller = _Caller()
    caller.services = services or {}                        # type: ignore[attr-defined]
    caller.user = {"id": _user_id(user)}                     # type: ignore[attr-defined]
    return await knowledge_for(caller)


def _user_id(user: Any) -> str:
    if isinstance(user, dict):
        return str(user.get("id") or "default")
    return str(user or "default")


async def ask(query: str, *, session_id: str | None = None, kb: str | None = None,
              model: str | None = None, workflow: str | Path | None = None,
              user: str | dict[str, Any] | None = None, storage: Any = None,
              web_backend: str | None = None, web_source: str | None = None,
              web_tool: str | None = None, services: dict[str, Any] | None = None,
              on_event: Callable[[dict], None] | None = None,
              policy: Policy = TRUSTED, run_options: dict[str, Any] | None = None
              ) -> ChatAnswer:
    """Answer one question in a session (a new one when `session_id` is None).

    `run_options` go to `start_run` (the server passes `run_id`, `secrets`,
    `provider_keys`); `web_backend` defaults to FLOWFORGE_WEB_SEARCH, else the
    workflow's own default (offline); `web_tool` (the web tool's name: the seed's
    clients call it `perplexity_search`) to FLOWFORGE_CHAT_WEB_TOOL, else
    `web_search`."""
    if not isinstance(query, str) or not query.strip():
        raise InputError(["query: the question is empty: ask something"])
    # the question reaches the prompt, the stored session and its title: clean
    # of control and bidi characters and of markup before any of them
    query = shown_text(query)
    if not query:
        raise InputError(["query: the question is empty once control characters and markup "
                          "are removed: ask it in plain text"])
    session_id = _check_session_id(session_id) if session_id else uuid.uuid4().hex
    user_key = _user_id(user)
    async with open_storage(storage if storage is not None else None) as opened:
        if opened is None:
            raise InputError(["storage: the chat keeps its sessions in the run storage: give "
                              "`storage` (a URL or a Storage), not False"])
        found = await opened.chat_session(user_key, session_id)
        history = [{"role": m["role"], "content": m.get("content") or ""}
                   for m in (found or {}).get("messages", [])
                   if m.get("role") in ("user", "assistant")][-HISTORY_MESSAGES:]
        inputs: dict[str, Any] = {"query": query.strip(), "history": history}
        # a session keeps the base it was started with: a follow-up that names none
        # searches the same one (the CLI, the API and the web app alike)
        kb = kb or session_base(found)
        # a folder is the server's files: without `server_files` a name is only a name
        folders = policy.allows("server_files")
        if kb:
            policy.check_kb_id(kb, "kb_id")
            inputs["kb"] = await knowledge_base_for(kb, user=user, services=services) \
                if folders else kb
        if workflow is None:        # the shipped chat cannot work without its first base
            await _check_base(inputs.get("kb") or "default_kb", user=user, services=services)
        web_backend = web_backend or os.environ.get("FLOWFORGE_WEB_SEARCH") or None
        if web_backend:
            inputs["web_backend"] = web_backend
            if workflow is None and web_backend != "offline":
                inputs["answer_after"] = []     # a real web: the model decides when to use it
        web_tool = web_tool or os.environ.get("FLOWFORGE_CHAT_WEB_TOOL") or None
        if web_tool:
            inputs["web_tool"] = web_tool
        if web_source:
            policy.check_kb_id(web_source, "web_source")
            inputs["web_source"] = await knowledge_base_for(web_source, user=user,
                                                            services=services, prefix="web-") \
                if folders else web_source
        handle = await start_run(_compiled(workflow or CHAT_WORKFLOW), inputs, user=user,
                                 storage=opened,
                                 model=model, services=services, on_event=on_event,
                                 policy=policy, **(run_options or {}))
        result = await handle.wait()
        output = result.results.get("answer") or {}
        if result.status != "succeeded" or "answer" not in output:
            record = result.blocks.get("answer")
            reason = (record.error if record is not None and record.error else result.error) \
                or f"the run ended {result.status}"
            raise ChatError(f"the chat could not answer: {reason}", run_id=result.run_id,
                            session_id=session_id)
        answer = ChatAnswer(
            answer=shown_text(str(output.get("answer") or "")),
            sources=list(output.get("sources") or []),
            confidence_score=output.get("confidence_score"),
            used_internal_kb=bool(output.get("used_internal_kb")),
            used_external_kb=bool(output.get("used_external_kb")),
            session_id=session_id, run_id=result.run_id,
            formatted_response=_formatted(output),
            tool_calls=[c.get("name") for c in (output.get("toolCalls") or {}).get("list", [])])
        await opened.append_chat_messages(user_key, session_id, [
            {"role": "user", "content": query.strip(), **({"kb": kb} if kb else {})},
            {"role": "assistant", "content": answer.answer, "sources": answer.sources,
             "confidence_score": answer.confidence_score,
             "used_internal_kb": answer.used_internal_kb,
             "used_external_kb": answer.used_external_kb, "run_id": answer.run_id}],
            title=query.strip()[:80])
        return answer


def _formatted(output: dict[str, Any]) -> str:
    """The answer tool's `formatted_response`, each line cleaned like the answer
    (an edited workflow's own tool may send anything)."""
    return "\n".join(shown_text(line) if line.strip() else ""
                     for line in str(output.get("formatted_response") or "").split("\n"))


def session_base(session: dict[str, Any] | None) -> str | None:
    """The knowledge base a session's last question named, if any."""
    for message in reversed((session or {}).get("messages") or []):
        if isinstance(message, dict) and isinstance(message.get("kb"), str) and message["kb"]:
            return message["kb"]
    return None


async def list_sessions(*, user: Any = None, storage: Any = None) -> list[dict[str, Any]]:
    async with open_storage(storage) as opened:
        assert opened is not None
        return await opened.list_chat_sessions(_user_id(user))


async def get_session(session_id: str, *, user: Any = None, storage: Any = None
                      ) -> dict[str, Any] | None:
    async with open_storage(storage) as opened:
        assert opened is not None
        return await opened.chat_session(_user_id(user), _check_session_id(session_id))


async def delete_session(session_id: str, *, user: Any = None, storage: Any = None) -> bool:
    async with open_storage(storage) as opened:
        assert opened is not None
        return await opened.delete_chat_session(_user_id(user), _check_session_id(session_id))
