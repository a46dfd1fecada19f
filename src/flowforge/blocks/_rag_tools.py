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
documents and web pages were actually returned, to mark each source.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flowforge.errors import FlowforgeError, ToolError
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["RAG_TOOL_KINDS", "build_rag_tool", "GENERIC_KEYWORDS", "RESPONSE_PARAMETERS",
           "RagSearchOptions", "WebSearchOptions", "KeywordIndexOptions",
           "FinalResponseOptions"]


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RagSearchOptions(_Options):
    knowledge_base: str | None = None
    """Default `kb_id` (default: default_kb)."""
    knowledge_bases: list[str] | None = None
    """The only bases the model may name (default: any the user can read)."""
    top_k: int | None = Field(None, ge=1, le=20)
    mode: str | None = Field(None, pattern="^(vector|text|hybrid)$")
    min_similarity: float | None = Field(None, ge=-1, le=1)
    filters: dict[str, str | list[str]] | None = None


class WebSearchOptions(_Options):
    backend: str | None = None
    """offline (default), perplexity or tavily."""
    max_results: int | None = Field(None, ge=1, le=20)
    folder: str | None = None
    """offline: a folder of pages standing in for the web."""
    knowledge_base: str | None = None
    """offline: a knowledge base standing in for the web."""
    mode: str | None = None
    min_similarity: float | None = None
    model: str | None = None
    """perplexity: the Sonar model (default sonar)."""
    search_depth: str | None = None
    """tavily: basic (default) or advanced."""
    base_url: str | None = None
    timeout: float | None = Field(None, gt=0)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str | None) -> str | None:
        if value is None or value in ("offline", "perplexity", "tavily") or "{{" in value:
            return value
        raise ValueError(f"unknown backend {value!r}: use offline, perplexity or tavily")


class KeywordIndexOptions(_Options):
    query: str | None = None
    """The question the keywords are linked to (templates allowed)."""
    namespace: str | None = None
    min_keywords: int | None = Field(None, ge=1, le=50)
    max_keywords: int | None = Field(None, ge=1, le=50)


class FinalResponseOptions(_Options):
    require_sources: bool | None = None
    """Refuse an answer without sources (default true)."""

RAG_TOOL_KINDS = ("rag_search", "web_search", "keyword_index", "final_response")

#: Words too general to find anything again; refused by `index_keywords` with feedback.
GENERIC_KEYWORDS = frozenset("""information info data answer answers question questions help
thing things stuff topic topics result results search web internet page pages document
documents details detail general overview example examples something anything everything
people way ways time times use using used new good best more most other""".split())

_DEFAULT_KB = "default_kb"

RESPONSE_PARAMETERS: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["answer", "sources", "used_internal_kb", "used_external_kb"],
    "properties": {
        "answer": {"type": "string", "minLength": 1, "maxLength": 8000,
                   "description": "The answer for the user, in plain prose."},
        "sources": {"type": "array", "maxItems": 20,
                    "description": "Every source the answer relies on: knowledge-base document "
                                   "names and web page URLs, as the tools returned them.",
                    "items": {"anyOf": [
                        {"type": "string", "minLength": 1, "maxLength": 200},
                        {"type": "object", "properties": {
                            "title": {"type": "string", "maxLength": 300},
                            "url": {"type": "string", "maxLength": 500},
                            "document_id": {"type": "string", "maxLength": 300},
                            "kind": {"enum": ["kb", "web"]}}}]}},
        "confidence_score": {"type": "number", "minimum": 0.0, "maximum": 1.0,
                             "description": "How sure you are of the answer, 0.0 to 1.0."},
        "used_internal_kb": {"type": "boolean",
                             "description": "True when the answer uses knowledge-base results."},
        "used_external_kb": {"type": "boolean",
                             "description": "True when the answer uses web search results."}}}


def _state(context: Any) -> dict[str, Any]:
    return context.setdefault("rag", {"kb": {}, "web": {}, "last_web": None})


async def _knowledge(context: Any) -> Any:
    from flowforge.knowledge.api import knowledge_for
    return await knowledge_for(context)


def build_rag_tool(kind: str, options: dict[str, Any], *, name: str | None,
                   description: str | None, parameters: dict[str, Any] | None,
                   context: Any, shared: dict[str, Any]) -> Tool:
    builder = {"rag_search": _rag_search, "web_search": _web_search,
               "keyword_index": _keyword_index, "final_response": _final_response}[kind]
    tool = builder(dict(options or {}), context, _state(shared))
    if name:
        tool.name = name
    if description:
        tool.description = description
    if parameters:
        tool.parameters = parameters
    return tool


def _only(kind: str, options: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ToolError(f"{kind}: unknown option(s) {', '.join(unknown)}; allowed: "
                        f"{', '.join(sorted(allowed)) or 'none'}")


# -- knowledge_base_search ---------------------------------------------------------------
def _rag_search(options: dict[str, Any], context: Any, state: dict[str, Any]) -> Tool:
    _only("rag_search", options, {"knowledge_base", "knowledge_bases", "top_k", "mode",
                                  "min_similarity", "filters"})
    default_kb = str(options.get("knowledge_base") or _DEFAULT_KB)
    allowed = options.get("knowledge_bases")
    default_top = int(options.get("top_k") or 5)
    parameters = {
        "type": "object", "additionalProperties": False, "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 2, "maxLength": 500,
                      "description": "A search query written for the knowledge base: the "
                                     "question's key terms, not the whole conversation."},
            "kb_id": {"type": "string", "default": default_kb, "maxLength": 100,
                      "description": f"Knowledge base to search (default '{default_kb}')."},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": default_top,
                      "description": f"How many passages to return (default {default_top})."}}}

    async def run(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        kb_id = str(arguments.get("kb_id") or default_kb)
        if allowed and kb_id not in allowed:
            raise ToolError(f"knowledge_base_search: kb_id '{kb_id}' is not one this chat may "
                            f"search; use one of {', '.join(allowed)} (default '{default_kb}')")
        knowledge = await _knowledge(tool_ctx.block_context or context)
        try:
            found = await knowledge.search(kb_id, str(arguments["query"]),
                                           top_k=int(arguments.get("top_k") or default_top),
                                           mode=options.get("mode") or "hybrid",
                                           filters=options.get("filters"),
                                           min_similarity=options.get("min_similarity"))
        except FlowforgeError as exc:
            raise ToolError(f"knowledge_base_search: {exc}") from None
        chunks, scores, metadata = [], [], []
        for hit in found.get("results") or []:
            content = str(hit.get("content") or "")
            title = str(hit.get("documentName") or hit.get("documentId") or "")
            chunks.append(content)
            scores.append(round(float(hit.get("similarity") or 0.0), 4))
            meta = {"document_id": hit.get("documentId"), "title": title,
                    "section": _section(content), "chunk_index": hit.get("chunkIndex"),
                    "kb_id": kb_id}
            metadata.append(meta)
            state["kb"][title] = meta
            if hit.get("documentId"):
                state["kb"][str(hit["documentId"])] = meta
        state["kb_searched"] = True
        return {"chunks": chunks, "scores": scores, "metadata": metadata,
                "kb_id": kb_id, "query": arguments["query"]}

    return Tool(name="knowledge_base_search",
                description=("Search the knowledge base. Call it first for every question, "
                             "with a query written for the search."),
                parameters=parameters, execute=run, kind="knowledge")


def _section(content: str) -> str | None:
    for line in content.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip() or None
    return None


# -- web_search ---------------------------------------------------------------------------
def _web_search(options: dict[str, Any], context: Any, state: dict[str, Any]) -> Tool:
    from flowforge.websearch import TOOL_PARAMETERS, make_backend

    max_results = int(options.get("max_results") or 5)
    base_dir = getattr(context, "source_dir", Path())     # workflow.paths decides
    backend_holder: dict[str, Any] = {}

    async def run(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        block = tool_ctx.block_context or context
        backend = backend_holder.get("backend")
        if backend is None:
            knowledge = await _knowledge(block) if (options.get("backend") or
                                                    "offline") == "offline" else None
            provider_env = getattr(block, "provider_env", None)
            env = provider_env() if provider_env is not None else dict(tool_ctx.env or {})
            backend = make_backend(options, knowledge=knowledge, env=env, base_dir=base_dir)
            backend_holder["backend"] = backend
        result = (await backend.search(str(arguments["query"]), context=arguments.get("context"),
                                       max_results=max_results)).to_dict()
        for citation in result["citations"]:
            state["web"][citation["url"]] = citation
            state["web"].setdefault(citation["title"], citation)
        state["last_web"] = {"query": arguments["query"], **result}
        return result

    if (options.get("backend") or "offline") == "offline" and options.get("folder"):
        from flowforge.blocks.base import policy_of
        policy_of(context).require("server_files", "with.tools",
                                   "searching a folder on the server as the offline web")
    return Tool(name="web_search",
                description=("Search the web. Call it only when the knowledge base results are "
                             "not enough to answer."),
                parameters=TOOL_PARAMETERS, execute=run, kind="web")


# -- index_keywords -----------------------------------------------------------------------
def _keyword_index(options: dict[str, Any], context: Any, state: dict[str, Any]) -> Tool:
    from flowforge.knowledge.keywords import check_keywords

    _only("keyword_index", options, {"query", "namespace", "min_keywords", "max_keywords"})
    low, high = int(options.get("min_keywords") or 3), int(options.get("max_keywords") or 10)
    namespace = str(options.get("namespace") or "chat")
    parameters = {
        "type": "object", "additionalProperties": False, "required": ["keywords"],
        "properties": {"keywords": {
            "type": "array", "minItems": low, "maxItems": high,
            "items": {"type": "string", "minLength": 2, "maxLength": 50},
            "description": f"{low} to {high} specific keywords (2-50 characters each) naming "
                           f"what the web results were about."}}}

    async def run(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        if not state.get("last_web"):
            raise ToolError("index_keywords indexes what a web search found: call web_search "
                            "first; if the knowledge base answered the question, call "
                            "generate_response instead")
        words = arguments["keywords"]
        valid, rejected = check_keywords(words)
        for norm in list(valid):
            if norm in GENERIC_KEYWORDS:
                rejected.append({"keyword": valid.pop(norm),
                                 "reason": "too generic to find anything again"})
        merged = len([w for w in words if isinstance(w, str)]) - len(valid) - len(rejected)
        if len(valid) < low:
            raise ToolError(f"index_keywords: {len(valid)} usable keyword(s), at least {low} "
                            f"needed; refused: "
                            f"{'; '.join(r['keyword'] + ' (' + r['reason'] + ')' for r in rejected) or 'none'}"
                            f". Send specific terms from the web results (names, products, "
                            f"places, rules), not general words.")
        web = state.get("last_web") or {}
        result_text = json.dumps({"answer": str(web.get("answer") or "")[:1500],
                                  "citations": [c.get("url") for c in web.get("citations") or []]},
                                 ensure_ascii=False) if web else ""
        knowledge = await _knowledge(tool_ctx.block_context or context)
        outcome = await knowledge.index_keywords(list(valid.values()),
                                                 str(options.get("query") or web.get("query")
                                                     or ""),
                                                 result_text, namespace=namespace)
        state["keywords"] = list(valid.values())
        return {"indexed": list(valid.values()), "duplicates_merged": max(merged, 0),
                "rejected": rejected,
                "feedback": ("all keywords indexed" if not rejected else
                             f"indexed {len(valid)}; refused {len(rejected)}: "
                             + "; ".join(f"{r['keyword']} ({r['reason']})" for r in rejected)),
                "linked_to": {"query": outcome.get("query"),
                              "result": bool(result_text)}}

    return Tool(name="index_keywords",
                description=("Index 3 to 10 specific keywords after a web search, so later "
                             "questions on the same subject find this result."),
                parameters=parameters, execute=run, kind="keywords")


# -- generate_response --------------------------------------------------------------------
def _final_response(options: dict[str, Any], context: Any, state: dict[str, Any]) -> Tool:
    _only("final_response", options, {"require_sources"})
    require_sources = options.get("require_sources", True)

    async def run(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        sources = [_source(item, state) for item in arguments.get("sources") or []]
        if require_sources and not sources:
            raise ToolError("generate_response: `sources` is empty; list the knowledge-base "
                            "documents and web pages the answer uses (as the tools returned "
                            "them)")
        kinds = {s["kind"] for s in sources}
        # The flags say what was used; they are kept true to what the tools did
        # (a model may claim the web without having searched it) and the
        # correction is recorded, so a user's "used_external_kb" never lies.
        claimed = (bool(arguments["used_internal_kb"]), bool(arguments["used_external_kb"]))
        used_kb = (claimed[0] or "kb" in kinds) and bool(state.get("kb_searched"))
        used_web = (claimed[1] or "web" in kinds) and bool(state.get("last_web"))
        corrected = [name for name, said, real in (("used_internal_kb", claimed[0], used_kb),
                                                   ("used_external_kb", claimed[1], used_web))
                     if said != real]
        confidence = arguments.get("confidence_score")
        lines = [str(arguments["answer"]).strip()]
        if sources:
            lines.append("")
            lines.append("Sources:")
            lines += [f"[{s['kind'].upper()}] {s['title']}"
                      + (f" <{s['url']}>" if s.get("url") else "") for s in sources]
        return {"formatted_response": "\n".join(lines),
                "used_internal_kb": used_kb, "used_external_kb": used_web,
                "metadata": {"sources": sources, "confidence_score": confidence,
                             "used_internal_kb": used_kb, "used_external_kb": used_web,
                             "source_kinds": sorted(kinds), "corrected": corrected,
                             "keywords": state.get("keywords") or []}}

    return Tool(name="generate_response",
                description=("Give the final answer. This is the only way to answer the user; "
                             "call it once, last."),
                parameters=RESPONSE_PARAMETERS, execute=run, kind="response")


_URL = re.compile(r"^(https?://|offline:)\S+$")


def _source(item: Any, state: dict[str, Any]) -> dict[str, Any]:
    """One source as `{kind, title, url?, document_id?}`: marked web when it is a page
    web_search returned (by address or title) or any address, else kb (a document
    name, whether or not this turn's search returned it)."""
    if isinstance(item, dict):
        title = str(item.get("title") or item.get("url") or item.get("document_id") or "")
        url = item.get("url")
        kind = item.get("kind")
        key = str(url or item.get("document_id") or title)
    else:
        key = title = str(item).strip()
        url, kind = None, None
    web = state["web"].get(key)
    kb = state["kb"].get(key) or state["kb"].get(title)
    if kind is None:       # a page the search returned, or any address, is the web
        kind = "web" if (web and not kb) or url or _URL.match(key) else "kb"
    out: dict[str, Any] = {"kind": kind, "title": (web or {}).get("title") or title}
    if kind == "web":
        out["url"] = url or (web or {}).get("url") or (key if _URL.match(key) else None)
        if not out["url"]:
            out.pop("url")
    elif kb:
        out["document_id"] = kb.get("document_id")
        out["title"] = kb.get("title") or title
    return out
