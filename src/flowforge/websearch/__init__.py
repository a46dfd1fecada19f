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
           "TavilySearch", "BACKENDS", "BACKEND_OPTIONS", "backend_options", "make_backend",
           "TOOL_PARAMETERS"]

BACKENDS = ("offline", "perplexity", "tavily")
#: What each back end takes besides `backend` and `max_results` (which all take).
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "offline": ("folder", "knowledge_base", "mode", "min_similarity"),
    "perplexity": ("model", "base_url", "timeout"),
    "tavily": ("search_depth", "base_url", "timeout"),
}

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
    backend, kept = backend_options(options)
    if backend == "perplexity":
        return PerplexitySearch(env=env, **kept)
    if backend == "tavily":
        return TavilySearch(env=env, **kept)
    if kept.get("folder") is not None:          # offline, the one back end left
        from flowforge.workflow.paths import resolve_path
        try:
            kept["folder"] = resolve_path(kept["folder"], None if base_dir is None
                                          else Path(base_dir), "web search folder")
        except WorkflowError as exc:
            raise ToolError(str(exc)) from None
    if knowledge is None:
        raise ToolError("web_search (offline): no knowledge layer to search")
    return OfflineSearch(knowledge, **kept)


def backend_options(options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The back end `options` name (default offline) and the options it
    takes; ToolError names one it does not take.  `validate` (an agent's
    `web_search` tool options) and the run ask this one function, so what
    validates runs.  An offline option beside another back end is dropped: one
    document can name both kinds (the chat's `--web` picks one at run time)."""
    options = {key: value for key, value in options.items() if value is not None}
    backend = options.pop("backend", None) or "offline"
    options.pop("max_results", None)
    allowed = BACKEND_OPTIONS.get(backend)
    if allowed is None:
        raise ToolError(f"web_search: unknown backend {backend!r}; use one of "
                        f"{', '.join(BACKENDS)}")
    if backend != "offline":
        options = {k: v for k, v in options.items() if k not in BACKEND_OPTIONS["offline"]}
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        owners = {name: kind for kind, names in BACKEND_OPTIONS.items() for name in names}
        whose = "; ".join(f"`{name}` is {owners[name]}'s" for name in unknown if name in owners)
        raise ToolError(f"web_search ({backend}): unknown option(s) {', '.join(unknown)}"
                        f"{' (' + whose + ')' if whose else ''}; the {backend} back end takes: "
                        f"{', '.join(sorted({*allowed, 'backend', 'max_results'}))}")
    return backend, options
