"""`web_search(query, context?)`: the chat's look at the web, allowed once the
knowledge base was searched (`flowforge.websearch` does the searching)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowforge.blocks._rag_tools.state import (RagState, clean_text, knowledge_of, narrow,
                                               withhold)
from flowforge.errors import ToolError
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["web_search_tool"]


def web_search_tool(options: dict[str, Any], context: Any, state: RagState) -> Tool:
    from flowforge.websearch import TOOL_PARAMETERS, make_backend

    max_results = int(options.get("max_results") or 5)
    base_dir = getattr(context, "source_dir", Path())     # workflow.paths decides
    backend_holder: dict[str, Any] = {}

    async def run(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        if not state.kb_searched:
            raise ToolError("ERROR: You did not call knowledge_base_search first. Search the "
                            "knowledge base before the web; call web_search only when its "
                            "results are not enough.")
        query = clean_text(str(arguments["query"])).strip()
        if not query:
            raise ToolError("web_search: the query is empty once control characters are "
                            "removed; send a focused query")
        context_text = arguments.get("context")
        if isinstance(context_text, str):
            context_text = clean_text(context_text)
        block = tool_ctx.block_context or context
        backend = backend_holder.get("backend")
        if backend is None:
            knowledge = await knowledge_of(block) if (options.get("backend") or
                                                    "offline") == "offline" else None
            provider_env = getattr(block, "provider_env", None)
            env = provider_env() if provider_env is not None else dict(tool_ctx.env or {})
            backend = make_backend(options, knowledge=knowledge, env=env, base_dir=base_dir)
            backend_holder["backend"] = backend
        found = await backend.search(query, context=context_text, max_results=max_results)
        withhold(state, list(getattr(found, "findings", None) or []), tool_ctx)
        result = found.to_dict()
        if not result["metadata"].get("withheld"):
            state.shown.append(str(result.get("answer") or ""))
        for citation in result["citations"]:
            if citation.get("withheld"):          # a page that talks to the model: not a source
                state.withheld_sources[str(citation.get("url"))] = \
                    citation["withheld"]["where"]
                continue
            state.shown.append(f"{citation.get('url')} {citation.get('snippet') or ''}")
            state.passages.append({"title": citation.get("title") or citation["url"],
                                   "url": citation["url"], "kind": "web",
                                   "content": str(citation.get("snippet") or "")})
            state.web[citation["url"]] = citation
            state.web.setdefault(citation["title"], citation)
        state.last_web = {"query": query, **result}
        narrow(state)
        return result

    if (options.get("backend") or "offline") == "offline" and options.get("folder"):
        from flowforge.blocks.base import policy_of
        policy_of(context).check_file(options.get("folder"), "with.tools")
    return Tool(name="web_search",
                description=("Search the web. Call it only when the knowledge base results are "
                             "not enough to answer."),
                parameters=TOOL_PARAMETERS, execute=run, kind="web")
