"""The RAG chat's tools, as tool entries any agent can use:

    - {rag_search: {knowledge_base: "{{input.kb}}", top_k: 5}}     # knowledge_base_search
    - {web_search: {backend: offline, folder: web}}                # web_search
    - {keyword_index: {query: "{{input.query}}", namespace: chat}}  # index_keywords
    - {final_response: {}}                                         # generate_response

Each has the contract's exact name and arguments (a `name:` renames it; a
`description:` replaces the text the model reads, so a team can tune it in
the workflow).  Together with the agent's `required_tools` and
`finish_with`, they make the chat's rule: search the knowledge base first,
the web only when that is not enough, index keywords after web results, and
answer only through `generate_response`.

The tools of one agent turn share a small state: `index_keywords` links its
keywords to the question and to the last web result without the model
having to copy them, and `generate_response` knows which knowledge-base
documents and web pages were actually returned.  That is what makes a
citation true: a source the tools never returned (a title the model made up,
a sentence of its answer, a document of another base) is sent back to the
model with the list of real sources, then refused; `used_internal_kb` and
`used_external_kb` are read off the verified sources, never off the model's
claim.  An answer with no sources is allowed when it claims neither, since
"neither the knowledge base nor the web has this" must be a possible answer.
Search queries and answers are cleaned of NUL, bidirectional-override and
other control characters, and answers of markup (`flowforge.safe_text`),
before they go anywhere.  A passage or web page that addresses the model is
withheld (`flowforge.knowledge.injection`): the model reads a note instead,
it cannot be cited, the run's events say so, and an answer that repeats
what it asked for (its address, its quoted text) is replaced by a sentence
saying that its source was withheld.

One module per tool (`kb_search`, `web_search`, `keywords`,
`final_response`); what they share is `state.RagState`, and the options a
workflow writes are `options`.
"""

from __future__ import annotations

from typing import Any

from flowforge.blocks._rag_tools.final_response import RESPONSE_PARAMETERS, final_response_tool
from flowforge.blocks._rag_tools.kb_search import kb_search_tool
from flowforge.blocks._rag_tools.keywords import GENERIC_KEYWORDS, keyword_index_tool
from flowforge.blocks._rag_tools.options import (FinalResponseOptions, KeywordIndexOptions,
                                                RagSearchOptions, WebSearchOptions)
from flowforge.blocks._rag_tools.state import RagState, clean_answer, clean_text
from flowforge.blocks._rag_tools.web_search import web_search_tool
from flowforge.tools.spec import Tool

__all__ = ["RAG_TOOL_KINDS", "build_rag_tool", "GENERIC_KEYWORDS", "RESPONSE_PARAMETERS",
           "RagSearchOptions", "WebSearchOptions", "KeywordIndexOptions",
           "FinalResponseOptions", "RagState", "clean_text", "clean_answer"]

RAG_TOOL_KINDS = ("rag_search", "web_search", "keyword_index", "final_response")

_BUILDERS = {"rag_search": kb_search_tool, "web_search": web_search_tool,
             "keyword_index": keyword_index_tool, "final_response": final_response_tool}


def build_rag_tool(kind: str, options: dict[str, Any], *, name: str | None,
                   description: str | None, parameters: dict[str, Any] | None,
                   context: Any, shared: dict[str, Any]) -> Tool:
    """One chat tool; the tools built with the same `shared` mapping (one
    agent's) share one `RagState`."""
    tool = _BUILDERS[kind](dict(options or {}), context, RagState.of(shared))
    if name:
        tool.name = name
    if description:
        tool.description = description
    if parameters:
        tool.parameters = parameters
    return tool
