"""`index_keywords(keywords)`: after a web search, keywords that let a later
question on the same subject find its result again."""

from __future__ import annotations

import json
from typing import Any

from flowforge.blocks._rag_tools.state import RagState, clean_text, knowledge_of, only
from flowforge.errors import ToolError
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["keyword_index_tool", "GENERIC_KEYWORDS"]

#: Words too general to find anything again; refused by `index_keywords` with feedback.
GENERIC_KEYWORDS = frozenset("""information info data answer answers question questions help
thing things stuff topic topics result results search web internet page pages document
documents details detail general overview example examples something anything everything
people way ways time times use using used new good best more most other""".split())


def keyword_index_tool(options: dict[str, Any], context: Any, state: RagState) -> Tool:
    from flowforge.knowledge.keywords import check_keywords

    only("keyword_index", options, {"query", "namespace", "min_keywords", "max_keywords"})
    low, high = int(options.get("min_keywords") or 3), int(options.get("max_keywords") or 10)
    namespace = str(options.get("namespace") or "chat")
    parameters = {
        "type": "object", "additionalProperties": False, "required": ["keywords"],
        "properties": {
            "keywords": {
                "type": "array", "minItems": low, "maxItems": high,
                "items": {"type": "string", "minLength": 2, "maxLength": 50},
                "description": f"{low} to {high} specific keywords (2-50 characters each) "
                               f"naming what the web results were about."},
            # The seed's clients send these too; both are optional, since the tool
            # already knows the question and the last web result.
            "query": {"type": "string", "maxLength": 4000,
                      "description": "The question the keywords belong to (default: this "
                                     "conversation's question)."},
            "perplexity_result_id": {"type": "string", "maxLength": 200,
                                     "description": "Which web result they describe "
                                                    "(default: the last one)."}}}

    async def run(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        if not state.last_web:
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
        web = state.last_web or {}
        result_text = json.dumps({"answer": str(web.get("answer") or "")[:1500],
                                  "citations": [c.get("url") for c in web.get("citations") or []]},
                                 ensure_ascii=False) if web else ""
        knowledge = await knowledge_of(tool_ctx.block_context or context)
        question = clean_text(str(arguments.get("query") or options.get("query")
                                  or web.get("query") or ""))
        outcome = await knowledge.index_keywords(list(valid.values()), question, result_text,
                                                 namespace=namespace)
        state.keywords = list(valid.values())
        known = outcome.get("already_known") or []
        merged = max(merged, 0) + len(known)
        # The seed's answer (`indexed: true`, `keyword_count`, `merged`) with the
        # keywords themselves and what was refused.
        return {"indexed": True, "keyword_count": len(valid), "merged": merged > 0,
                "keywords": list(valid.values()), "duplicates_merged": merged,
                "already_known": known, "rejected": rejected,
                "feedback": ("all keywords indexed" if not rejected else
                             f"indexed {len(valid)}; refused {len(rejected)}: "
                             + "; ".join(f"{r['keyword']} ({r['reason']})" for r in rejected)),
                "linked_to": {"query": outcome.get("query"),
                              "result": bool(result_text)}}

    return Tool(name="index_keywords",
                description=("Index 3 to 10 specific keywords after a web search, so later "
                             "questions on the same subject find this result."),
                parameters=parameters, execute=run, kind="keywords")
