"""Web search for agents: one tool, `web_search(query, context?)`, with back
ends chosen by configuration and results normalised to `{answer, citations,
metadata}` (see `base`).

    backend: perplexity     Sonar chat completions with citations (PERPLEXITY_API_KEY)
    backend: tavily         Tavily /search (TAVILY_API_KEY)
    backend: offline        a folder or knowledge base standing in for the web (default:
                            works with no network, as the demo and the tests do)

`web_search_tool(...)` builds the agent tool; `make_backend(...)` the back end,
whose results are screened for instructions aimed at the model (`base.screen_result`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from flowforge.errors import ToolError, WorkflowError
from flowforge.websearch.base import ScreenedSearch, SearchResult, WebSearchBackend
from flowforge.websearch.offline import OfflineSearch
from flowforge.websearch.perplexity import PerplexitySearch
from flowforge.websearch.tavily import TavilySearch

__all__ = ["SearchResult", "WebSearchBackend", "OfflineSearch", "PerplexitySearch",
           "TavilySearch", "BACKENDS", "make_backend", "TOOL_PARAMETERS"]

BACKENDS = ("offline", "perplexity", "tavily")
_OFFLINE_ONLY = ("folder", "knowledge_base", "mode", "min_similarity")

#: The tool's arguments, as the chat's contract has them.
TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["query"],
    "properties": {
        "query": {"type": "string", "minLength": 2, "maxLength": 400,
                  "description": "What to look up on the web, as a focused search query."},
        "context": {"type": "string", "maxLength": 4000,
                    "description": "Optional: a short summary of what the knowledge base "
                                   "already said, so the search looks for what is missing."}}}


def make_backend(options: Mapping[str, Any], *, knowledge: Any = None,
                 env: Mapping[str, str] | None = None, base_dir: str | Path | None = Path()
                 ) -> WebSearchBackend:
    """The back end named by `options["backend"]`, its results screened (`ScreenedSearch`)."""
    return ScreenedSearch(_backend(options, knowledge=knowledge, env=env, base_dir=base_dir))


def _backend(options: Mapping[str, Any], *, knowledge: Any = None,
             env: Mapping[str, str] | None = None, base_dir: str | Path | None = Path()
             ) -> WebSearchBackend:
    """The back end named by `options["backend"]` (default offline).  A
    relative `folder` resolves against `base_dir` (the document's root,
    `workflow.paths`; None: a server with no root, which refuses it)."""
    options = dict(options)
    backend = options.pop("backend", None) or "offline"
    options.pop("max_results", None)
    if backend != "offline":           # one document can name both kinds of back end
        for key in _OFFLINE_ONLY:
            options.pop(key, None)
    if backend == "perplexity":
        return PerplexitySearch(env=env, **_only(options, backend, {"model", "base_url",
                                                                   "timeout"}))
    if backend == "tavily":
        return TavilySearch(env=env, **_only(options, backend, {"search_depth", "base_url",
                                                               "timeout"}))
    if backend == "offline":
        kept = _only(options, backend, {"folder", "knowledge_base", "mode", "min_similarity"})
        if kept.get("folder") is not None:
            from flowforge.workflow.paths import resolve_path
            try:
                kept["folder"] = resolve_path(kept["folder"], None if base_dir is None
                                              else Path(base_dir), "web search folder")
            except WorkflowError as exc:
                raise ToolError(str(exc)) from None
        if knowledge is None:
            raise ToolError("web_search (offline): no knowledge layer to search")
        return OfflineSearch(knowledge, **kept)
    raise ToolError(f"web_search: unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")


def _only(options: dict[str, Any], backend: str, allowed: set[str]) -> dict[str, Any]:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ToolError(f"web_search ({backend}): unknown option(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(allowed | {'backend', 'max_results'}))}")
    return options
