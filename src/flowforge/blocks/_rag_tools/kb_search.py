"""`knowledge_base_search(query, kb_id?, top_k?)`: the chat's search of its
knowledge base, the first tool of every question."""

from __future__ import annotations

from typing import Any

from flowforge.blocks._rag_tools.state import (RagState, clean_text, knowledge_of, narrow, only,
                                               withhold)
from flowforge.errors import FlowforgeError, NotFound, ToolError
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["kb_search_tool", "DEFAULT_KB"]

DEFAULT_KB = "default_kb"


def kb_search_tool(options: dict[str, Any], context: Any, state: RagState) -> Tool:
    from flowforge.knowledge.injection import screen_results

    only("rag_search", options, {"knowledge_base", "knowledge_bases", "top_k", "max_top_k",
                                  "mode", "min_similarity", "filters"})
    default_kb = str(options.get("knowledge_base") or DEFAULT_KB)
    allowed = options.get("knowledge_bases")
    most = int(options.get("max_top_k") or 20)
    default_top = min(int(options.get("top_k") or 5), most)
    parameters = {
        "type": "object", "additionalProperties": False, "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 2, "maxLength": 500,
                      "description": "A search query written for the knowledge base: the "
                                     "question's key terms, not the whole conversation."},
            "kb_id": {"type": "string", "default": default_kb, "maxLength": 100,
                      "description": f"Knowledge base to search (default '{default_kb}')."},
            # no maximum: more than `most` is returned as `most`, with a note (a refused
            # top_k made the 0.5B model send it again until max_iterations)
            "top_k": {"type": "integer", "minimum": 1, "default": default_top,
                      "description": f"How many passages to return (default {default_top}, "
                                     f"at most {most})."}}}

    async def run(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        kb_id = str(arguments.get("kb_id") or default_kb)
        if allowed and kb_id not in allowed:
            raise ToolError(f"knowledge_base_search: kb_id '{kb_id}' is not one this chat may "
                            f"search; use one of {', '.join(allowed)} (default '{default_kb}')")
        query = clean_text(str(arguments["query"])).strip()
        if len(query) < 2:
            raise ToolError("knowledge_base_search: the query is empty once control "
                            "characters are removed; send the question's key terms")
        knowledge = await knowledge_of(tool_ctx.block_context or context)
        note = None
        asked = int(arguments.get("top_k") or default_top)
        top = min(asked, most)
        if asked > most:        # said, not refused: a refusal made the 0.5B model loop
            note = f"top_k {asked} is more than this chat returns; {most} passages returned"

        async def search(base: str) -> Any:
            return await knowledge.search(base, query,
                                          top_k=top,
                                          mode=options.get("mode") or "hybrid",
                                          filters=options.get("filters"),
                                          min_similarity=options.get("min_similarity"))
        try:
            try:
                found = await search(kb_id)
            except NotFound:
                if kb_id == default_kb:
                    raise
                # A base the model made up (small models invent ids): the chat's own
                # base is searched, and the result says so.
                note = "; ".join(filter(None, [note, (
                    f"there is no knowledge base '{kb_id}'; searched '{default_kb}', "
                    f"this chat's knowledge base")]))
                kb_id = default_kb
                found = await search(kb_id)
        except FlowforgeError as exc:
            raise ToolError(f"knowledge_base_search: {exc}") from None
        found, findings = screen_results(found, knowledge_base=kb_id)
        withhold(state, findings, tool_ctx)
        chunks, scores, metadata = [], [], []
        for hit in found.get("results") or []:
            content = str(hit.get("content") or "")
            title = str(hit.get("documentName") or hit.get("documentId") or "")
            chunks.append(content)
            scores.append(round(float(hit.get("similarity") or 0.0), 4))
            meta = {"document_id": hit.get("documentId"), "title": title,
                    "section": _section(content), "chunk_index": hit.get("chunkIndex"),
                    "kb_id": kb_id}
            if hit.get("withheld"):       # shown as withheld, never citable
                metadata.append({**meta, "section": None, "withheld": hit["withheld"]})
                state.withheld_sources[title] = hit["withheld"]["where"]
                continue
            state.shown.append(content)
            state.passages.append({"title": title, "content": content, "kind": "kb"})
            metadata.append(meta)
            state.kb[title] = meta
            if hit.get("documentId"):
                state.kb[str(hit["documentId"])] = meta
        state.kb_searched = True
        narrow(state)
        answer = {"chunks": chunks, "scores": scores, "metadata": metadata,
                  "kb_id": kb_id, "query": query}
        if note:
            answer["note"] = note
        if findings:
            answer["withheld"] = len(findings)
        return answer

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
