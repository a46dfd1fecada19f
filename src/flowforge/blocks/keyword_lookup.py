"""`keyword_lookup`: what earlier questions on the same subject found.

    - id: related
      type: keyword_lookup
      with: {text: "{{input.query}}", namespace: chat}

The RAG chat indexes the keywords of every web result it used
(`index_keywords`); a later question sharing those keywords gets the earlier
queries and results offered to the model, so a subject researched once is
not researched again.  The words of `text` (stop words and generic words
left out; single words, adjacent pairs and triples) are looked up in the user's index.

"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field

from flowforge.blocks._rag_tools import GENERIC_KEYWORDS
from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, FlowforgeError

__all__ = ["KeywordLookupBlock", "KeywordLookupConfig", "candidate_keywords"]

_WORD = re.compile(r"[\w][\w'-]*", re.UNICODE)


class KeywordLookupConfig(BlockConfig):
    text: str
    """The question whose words are looked up (templates allowed)."""
    namespace: str = "chat"
    """Which index (the chat's `keyword_index` tools write `chat`); kept per user."""
    limit: int = Field(3, ge=0, le=20)
    """How many earlier results to put in `context`."""


def candidate_keywords(text: str) -> list[str]:
    """Words and adjacent word pairs of `text` worth looking up."""
    from flowforge.knowledge.text import STOP_WORDS

    words = [w.lower() for w in _WORD.findall(text or "")]
    useful = [w for w in words if len(w) >= 2 and w not in STOP_WORDS
              and w not in GENERIC_KEYWORDS]
    pairs = [f"{a} {b}" for a, b in zip(words, words[1:])
             if a not in STOP_WORDS and b not in STOP_WORDS]
    triples = [f"{a} {b} {c}" for a, b, c in zip(words, words[1:], words[2:])
               if a not in STOP_WORDS and c not in STOP_WORDS]
    return list(dict.fromkeys(useful + pairs + triples))[:96]


@register_block
class KeywordLookupBlock(BlockType):
    type_name = "keyword_lookup"
    Config = KeywordLookupConfig
    outputs = {
        "keywords": Output("list of strings", "The indexed keywords the text matched."),
        "queries": Output("list of strings", "The earlier questions indexed under them."),
        "results": Output("list", "What those questions found (web results, shortened)."),
        "context": Output("string", "A ready paragraph for a prompt; \"\" when nothing "
                          "matched."),
    }

    @classmethod
    async def run(cls, context: BlockContext, config: KeywordLookupConfig) -> Any:
        from flowforge.knowledge.api import knowledge_for

        try:
            knowledge = await knowledge_for(context)
            found = await knowledge.lookup(candidate_keywords(config.text),
                                           namespace=config.namespace)
        except FlowforgeError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        matched = [entry["keyword"] for entry in found["keywords"].values()]
        results = [_readable(value) for value in found["results"]][: config.limit]
        lines = []
        if matched:
            lines.append("Earlier questions on the same subject ("
                         + ", ".join(matched) + "):")
            lines += [f"- {query}" for query in found["queries"][: config.limit]]
            if results:
                lines.append("What was found then:")
                lines += [f"- {result}" for result in results]
        return {"keywords": matched, "queries": found["queries"], "results": results,
                "context": "\n".join(lines)}


def _readable(value: str) -> str:
    """A stored result (the web answer and its pages, as JSON) as one line."""
    try:
        data = json.loads(value)
    except (TypeError, ValueError):
        return str(value)[:600]
    if not isinstance(data, dict):
        return str(value)[:600]
    pages = ", ".join(str(u) for u in data.get("citations") or [])
    text = " ".join(str(data.get("answer") or "").split())[:500]
    return text + (f" (pages: {pages})" if pages else "")
