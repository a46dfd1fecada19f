"""`web_search`: look queries up on the web as a plain block, for workflows
that decide the queries themselves (the research orchestrator's
knowledge-base phase) rather than leave them to an agent's tool call.

    - id: web
      type: web_search
      with: {queries: "{{queries.queries}}", backend: offline, knowledge_base: web,
             max_results: 3}

It is the RAG chat's `web_search` tool (`flowforge.websearch`, same back ends,
same result shape) run once per query.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output, policy_of
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, FlowforgeError
from flowforge.workflow.policy import CapabilityUse

__all__ = ["WebSearchBlock", "WebSearchConfig"]


class WebSearchConfig(BlockConfig):
    queries: str | list[str]
    """One query or a list of queries (templates allowed, e.g. `{{plan.queries}}`)."""
    backend: Literal["offline", "perplexity", "tavily"] = "offline"
    """Where to search: `offline` (a knowledge base or folder standing in for the
    web; needs no network), `perplexity` (PERPLEXITY_API_KEY), `tavily` (TAVILY_API_KEY)."""
    knowledge_base: str | None = None
    """Offline back end: the knowledge base standing in for the web."""
    folder: str | None = None
    """Offline back end: a folder of pages standing in for the web (relative to the
    workflow file), synced into a knowledge base of its own."""
    max_results: int = Field(3, ge=1, le=20)
    """Pages per query."""
    max_queries: int = Field(5, ge=1, le=20)
    """Queries beyond this many are left out (a model may propose too many)."""
    context: str | None = None
    """Optional: what is already known, passed to back ends that use it."""


@register_block
class WebSearchBlock(BlockType):
    """The web_search tool of the RAG chat, as a block over a list of queries."""

    type_name = "web_search"
    Config = WebSearchConfig
    outputs = {
        "results": Output("list of {query, answer, citations}", "What each query found, "
                          "in the order of the queries."),
        "citations": Output("list of {title, url, snippet}", "Every page found, once, in "
                            "the order found."),
        "context": Output("string", "The pages numbered with their titles and addresses, "
                          "ready for a prompt that must cite them."),
    }

    @classmethod
    def capabilities(cls, spec: Any) -> list[CapabilityUse]:
        if spec.with_.get("folder"):
            return [CapabilityUse("server_files", "folder",
                                  "searching a folder on the server as the offline web")]
        return []

    @classmethod
    async def run(cls, context: BlockContext, config: WebSearchConfig) -> Any:
        from flowforge.websearch import make_backend

        queries = [config.queries] if isinstance(config.queries, str) else list(config.queries)
        queries = [q.strip() for q in queries if isinstance(q, str) and q.strip()]
        queries = list(dict.fromkeys(queries))[:config.max_queries]
        if not queries:
            raise BlockError(context.block_id, cls.type_name,
                             "no query to search: `queries` is empty")
        options: dict[str, Any] = {"backend": config.backend}
        if config.backend == "offline":
            if config.folder:
                policy_of(context).check_file(config.folder, "with.folder")
                options["folder"] = config.folder
            if config.knowledge_base:
                options["knowledge_base"] = config.knowledge_base
        provider_env = getattr(context, "provider_env", None)
        env = provider_env() if provider_env is not None else dict(context.env or {})
        try:
            knowledge = None
            if config.backend == "offline":
                from flowforge.knowledge.api import knowledge_for
                knowledge = await knowledge_for(context)
            backend = make_backend(options, knowledge=knowledge, env=env,
                                   base_dir=getattr(context, "source_dir", Path()))
            results = []
            for query in queries:
                found = await backend.search(query, context=config.context,
                                             max_results=config.max_results)
                results.append({"query": query, **found.to_dict()})
        except FlowforgeError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        citations: list[dict[str, Any]] = []
        seen: set[str] = set()
        for result in results:
            for citation in result["citations"]:
                if citation.get("url") not in seen:
                    seen.add(citation.get("url"))
                    citations.append(citation)
        context.emit("progress", message=f"{len(citations)} web page(s) for "
                                         f"{len(queries)} quer{'y' if len(queries) == 1 else 'ies'}")
        return {"results": results, "citations": citations, "context": _context(citations)}


def _context(citations: list[dict[str, Any]]) -> str:
    return "\n\n".join(f"[{number}] {c.get('title') or c.get('url')} ({c.get('url')})\n"
                       f"{c.get('snippet') or ''}"
                       for number, c in enumerate(citations, 1)) or "No web pages matched."
