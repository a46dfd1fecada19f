"""The keyword index of the RAG chat: which questions and answers a keyword
came from, so a later question sharing its keywords can reuse them.

`index_keywords(keywords, query, result_id)` validates each keyword (2-50
characters, not blank, not a stop word), merges duplicates case- and
whitespace-insensitively ("Refund  Policy" and "refund policy" are one
keyword, shown as first written) and associates each valid keyword with the
query and the result it came from.  `lookup(keywords)` returns, for each
known keyword, the related queries and results, plus their union.

Stored in the knowledge store (SQLite or PostgreSQL, same interface); a
`namespace` keeps separate indexes apart (one per chat, or per user).
Exposed as two tools (`index_keywords`, `lookup_keywords`) and through
`Knowledge.index_keywords` / `Knowledge.lookup`.
"""

from __future__ import annotations

from typing import Any, Iterable

from flowforge.errors import ToolError
from flowforge.knowledge.store import KnowledgeStore
from flowforge.knowledge.text import STOP_WORDS

__all__ = ["normalise_keyword", "check_keywords", "index_keywords", "lookup", "tool_specs",
           "execute_tool"]

MIN_LENGTH, MAX_LENGTH = 2, 50


def normalise_keyword(keyword: str) -> str:
    """Case- and whitespace-insensitive form: lower case, single spaces."""
    return " ".join(str(keyword).split()).lower()


def check_keywords(keywords: Iterable[Any]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Valid keywords (normalised -> first display form) and the rejected ones with why."""
    valid: dict[str, str] = {}
    rejected: list[dict[str, str]] = []
    for keyword in keywords:
        if not isinstance(keyword, str):
            rejected.append({"keyword": repr(keyword), "reason": "not a string"})
            continue
        display = " ".join(keyword.split())
        norm = display.lower()
        if not norm:
            reason = "blank"
        elif len(norm) < MIN_LENGTH:
            reason = f"shorter than {MIN_LENGTH} characters"
        elif len(norm) > MAX_LENGTH:
            reason = f"longer than {MAX_LENGTH} characters"
        elif norm in STOP_WORDS:
            reason = "a stop word"
        else:
            valid.setdefault(norm, display)
            continue
        rejected.append({"keyword": keyword, "reason": reason})
    return valid, rejected


async def index_keywords(store: KnowledgeStore, keywords: Iterable[Any], query: str,
                         result_id: str, *, namespace: str = "default") -> dict[str, Any]:
    if isinstance(keywords, str):
        keywords = [keywords]
    valid, rejected = check_keywords(keywords)
    # A keyword already known keeps the form it was first written in.
    known: set[str] = set()
    for norm, display, _kind, _value in await store.keywords_lookup(namespace, list(valid)):
        valid[norm] = display
        known.add(norm)
    entries = []
    for norm, display in valid.items():
        if query and str(query).strip():
            entries.append((norm, display, "query", str(query).strip()))
        if result_id and str(result_id).strip():
            entries.append((norm, display, "result", str(result_id).strip()))
    if entries:
        await store.keywords_add(namespace, entries)
    return {"indexed": list(valid), "rejected": rejected, "query": query, "resultId": result_id,
            "already_known": [valid[norm] for norm in valid if norm in known]}


async def lookup(store: KnowledgeStore, keywords: Iterable[Any], *,
                 namespace: str = "default") -> dict[str, Any]:
    if isinstance(keywords, str):
        keywords = [keywords]
    wanted = list(dict.fromkeys(normalise_keyword(k) for k in keywords if isinstance(k, str)))
    rows = await store.keywords_lookup(namespace, [k for k in wanted if k])
    found: dict[str, dict[str, Any]] = {}
    queries: list[str] = []
    results: list[str] = []
    for norm, display, kind, value in rows:
        entry = found.setdefault(norm, {"keyword": display, "queries": [], "results": []})
        target, union = (entry["queries"], queries) if kind == "query" else (entry["results"], results)
        target.append(value)
        if value not in union:
            union.append(value)
    return {"keywords": found, "queries": queries, "results": results,
            "missing": [k for k in wanted if k not in found]}


def tool_specs() -> list[dict[str, Any]]:
    """Tool definitions for `index_keywords` and `lookup_keywords`."""
    words = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200},
             "minItems": 1, "maxItems": 50}
    return [
        {"name": "index_keywords",
         "description": "Remember the keywords of a question and the result that answered it.",
         "parameters": {"type": "object", "additionalProperties": False,
                        "required": ["keywords", "query", "result_id"],
                        "properties": {"keywords": words,
                                       "query": {"type": "string"},
                                       "result_id": {"type": "string"}}}},
        {"name": "lookup_keywords",
         "description": "Find earlier questions and results that share these keywords.",
         "parameters": {"type": "object", "additionalProperties": False,
                        "required": ["keywords"], "properties": {"keywords": words}}},
    ]


async def execute_tool(name: str, arguments: dict[str, Any], store: KnowledgeStore, *,
                       namespace: str = "default") -> dict[str, Any]:
    keywords = arguments.get("keywords")
    if not isinstance(keywords, list):
        raise ToolError(f"{name}: `keywords` must be a list of strings")
    if name == "index_keywords":
        return await index_keywords(store, keywords, arguments.get("query", ""),
                                    arguments.get("result_id", ""), namespace=namespace)
    if name == "lookup_keywords":
        return await lookup(store, keywords, namespace=namespace)
    raise ToolError(f"unknown keyword tool '{name}': use index_keywords or lookup_keywords")
