"""The RAG chat as a service: one question end to end - the session's history
in, the shipped workflow (`flowforge/apps/chat/chat.yaml`) run on the engine,
the exchange stored, the answer out.

The application's own rules (what a question and a session id may be, the
history sent, the base searched, the answer's shape, what is kept) are
`flowforge.apps.chat.session`'s; this module adds the store and the run.
It is the public `flowforge.chat`, so it names the application's answer,
error and helpers too; the CLI, the HTTP API and Python all call `ask`, so
they answer alike.

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
from pathlib import Path
from typing import Any, Callable

from flowforge.apps.chat import CHAT_WORKFLOW
from flowforge.apps.chat.session import (HISTORY_MESSAGES, ChatAnswer, ChatError, answer_of,
                                         chat_inputs, check_base_exists, check_session_id,
                                         clean_question, exchange, history_of,
                                         knowledge_base_for, session_base, user_key)
from flowforge.errors import InputError
from flowforge.service.runs import open_storage, start_run
from flowforge.workflow.policy import TRUSTED, Policy

#: `flowforge.chat`'s names: the service's own, and (the public API since
#: before the application had its folder) the application's it re-exports.
__all__ = ["CHAT_WORKFLOW", "ChatAnswer", "ChatError", "ask", "check_base", "knowledge_base_for",
           "list_sessions", "get_session", "delete_session", "session_base",
           "HISTORY_MESSAGES"]

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
            found = await opened.chat_session(user_key(user), check_session_id(session_id)) \
                if opened is not None else None
        kb = kb or session_base(found)
    if kb:
        policy.check_kb_id(kb, "kb_id")
        path = Path(kb).expanduser()
        if policy.allows("server_files") and path.is_dir() and ("/" in kb or kb.startswith(".")):
            return                  # a folder: `ask` makes its base
    await check_base_exists(kb or "default_kb", user=user, services=services)


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
    question = clean_question(query)
    session_id = check_session_id(session_id) if session_id else uuid.uuid4().hex
    key = user_key(user)
    async with open_storage(storage if storage is not None else None) as opened:
        if opened is None:
            raise InputError(["storage: the chat keeps its sessions in the run storage: give "
                              "`storage` (a URL or a Storage), not False"])
        found = await opened.chat_session(key, session_id)
        # a session keeps the base it was started with: a follow-up that names none
        # searches the same one (the CLI, the API and the web app alike)
        kb = kb or session_base(found)
        inputs = await chat_inputs(
            question, history_of(found), kb=kb,
            web_backend=web_backend or os.environ.get("FLOWFORGE_WEB_SEARCH") or None,
            web_tool=web_tool or os.environ.get("FLOWFORGE_CHAT_WEB_TOOL") or None,
            web_source=web_source, user=user, services=services, policy=policy,
            require_base=workflow is None)
        if workflow is None and inputs.get("web_backend") not in (None, "offline"):
            inputs["answer_after"] = []     # a real web: the model decides when to use it
        handle = await start_run(_compiled(workflow or CHAT_WORKFLOW), inputs, user=user,
                                 storage=opened,
                                 model=model, services=services, on_event=on_event,
                                 policy=policy, **(run_options or {}))
        answer = answer_of(await handle.wait(), session_id)
        await opened.append_chat_messages(key, session_id, exchange(question, kb, answer),
                                          title=question[:80])
        return answer


async def list_sessions(*, user: Any = None, storage: Any = None) -> list[dict[str, Any]]:
    async with open_storage(storage) as opened:
        assert opened is not None
        return await opened.list_chat_sessions(user_key(user))


async def get_session(session_id: str, *, user: Any = None, storage: Any = None
                      ) -> dict[str, Any] | None:
    async with open_storage(storage) as opened:
        assert opened is not None
        return await opened.chat_session(user_key(user), check_session_id(session_id))


async def delete_session(session_id: str, *, user: Any = None, storage: Any = None) -> bool:
    async with open_storage(storage) as opened:
        assert opened is not None
        return await opened.delete_chat_session(user_key(user), check_session_id(session_id))
