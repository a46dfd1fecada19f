"""Search a knowledge base: vector, full-text, or hybrid, with tag filters.

- `vector`: cosine similarity of the query's embedding to each chunk's.
- `text`: BM25 over the chunks' words (stop words dropped from the query,
  any remaining word may match); `similarity` is the BM25 score mapped to
  0..1 as s / (1 + s), so `min_similarity` means something in this mode too.
- `hybrid` (the default): both lists, fused by reciprocal rank
  (score = sum of 1 / (60 + rank)), so a chunk that either method ranks high
  surfaces; `similarity` is its cosine similarity.  The fusion chooses which
  `top_k` chunks come back; they come back sorted by the `similarity` they
  report, as in every mode, since a reader (and the seed's clients) read the
  list as best first by the score shown.

Filters `{tag: value or [values]}` mean: for every tag, one of its values
(`"policies|OR|legal"` and `[{tagName, tagValue}]`, Sim's spellings, too).
They are applied inside each search, never to its results, so a filtered
query returns `top_k` results whenever that many chunks match.  A filter no
document of the base can match (a tag none has, values none has) is an
error naming the tags and values the base has, never a silent empty list.

The result is the seed's shape plus `context` (the chunks joined for a
prompt): `{results: [{documentId, documentName, content, chunkIndex,
similarity, metadata: {tags, chunkId, createdAt, source, startChar,
endChar}}], query, totalResults, mode, cost, context}`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

from flowforge.errors import FlowforgeError, InvalidValue
from flowforge.knowledge.embeddings import Embedder
from flowforge.knowledge.ingest import IngestError, normalise_tags
from flowforge.knowledge.store import KnowledgeBase, KnowledgeStore
from flowforge.knowledge.text import query_terms

__all__ = ["MODES", "search", "rrf", "CONTEXT_SEPARATOR", "empty_result", "check_filters",
           "filter_problems", "OR_SEPARATOR"]

MODES = ("vector", "text", "hybrid")
RRF_K = 60
MAX_TOP_K = 100
CONTEXT_SEPARATOR = "\n\n---\n\n"


def rrf(*rankings: list[int], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal-rank fusion of several ranked id lists."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank + 1)
    return scores


#: Sim's way of writing "any of" inside one filter value: `policies|OR|legal`.
OR_SEPARATOR = "|OR|"


def check_filters(filters: Any) -> dict[str, list[str]]:
    """Filters in every spelling the seeds write, as `{tag: [values]}` (lower case):
    `{category: [policies, legal]}`, Sim's `{category: "policies|OR|legal"}`, and
    Sim's list `[{tagName: category, tagValue: policies}, ...]` (several entries
    of one tag mean any of them)."""
    if isinstance(filters, list):
        merged: dict[str, list[Any]] = {}
        for number, item in enumerate(filters):
            name = item.get("tagName", item.get("tag")) if isinstance(item, Mapping) else None
            value = item.get("tagValue", item.get("value")) if isinstance(item, Mapping) else None
            if not isinstance(name, str) or not name.strip() or value is None:
                raise InvalidValue(f"filters[{number}]: write a filter as {{tagName: category, "
                                 f"tagValue: policies}}, got {item!r}")
            merged.setdefault(name, []).extend(value if isinstance(value, list) else [value])
        filters = merged
    if isinstance(filters, Mapping):
        filters = {key: [part for item in (value if isinstance(value, (list, tuple, set))
                                           else [value])
                         for part in (str(item).split(OR_SEPARATOR) if item is not None
                                      else [])]
                   for key, value in filters.items()}
    try:
        return normalise_tags(filters, "filters")
    except IngestError as exc:
        raise FlowforgeError(str(exc)) from None


def filter_problems(wanted: Mapping[str, list[str]], documents: list[Any],
                    base: str) -> list[str]:
    """Why `wanted` can match no document of the base (`documents`: their
    `DocumentInfo`s): a tag no document has, values no document has for it, or
    tags no document has together; [] when some document matches."""
    if not wanted:
        return []
    matching = [doc for doc in documents
                if all(set(values) & set(doc.tags.get(tag) or []) for tag, values in wanted.items())]
    if matching:
        return []
    known: dict[str, set[str]] = {}
    for doc in documents:
        for tag, values in (doc.tags or {}).items():
            known.setdefault(tag, set()).update(values)
    problems = []
    for tag, values in wanted.items():
        if tag not in known:
            problems.append(f"filters.{tag}: no document of knowledge base '{base}' has the tag "
                            f"'{tag}' (its tags: {', '.join(sorted(known)) or 'none'})")
        elif not set(values) & known[tag]:
            problems.append(f"filters.{tag}: no document of knowledge base '{base}' has "
                            f"{tag} = {OR_SEPARATOR.join(values)} (its values: "
                            f"{', '.join(sorted(known[tag]))})")
    if not problems:
        problems.append(f"filters: no document of knowledge base '{base}' has all of "
                        + "; ".join(f"{tag} = {OR_SEPARATOR.join(values)}"
                                    for tag, values in wanted.items()) + " together")
    return problems


def _cost(embedder: Embedder | None, query: str) -> dict[str, float]:
    total = embedder.cost(embedder.count_tokens(query)) if embedder and embedder.cost(1) else 0.0
    return {"input": total, "output": 0.0, "total": total}


def empty_result(query: str, mode: str) -> dict[str, Any]:
    return {"results": [], "query": query, "totalResults": 0, "mode": mode,
            "cost": {"input": 0.0, "output": 0.0, "total": 0.0}, "context": ""}


async def search(store: KnowledgeStore, embedder: Embedder, base: KnowledgeBase, query: str, *,
                 top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 mode: str = "hybrid", min_similarity: float | None = None) -> dict[str, Any]:
    if mode not in MODES:
        raise FlowforgeError(f"unknown search mode '{mode}': use one of {', '.join(MODES)}")
    if not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise FlowforgeError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, got {top_k!r}")
    wanted = check_filters(filters)
    query = (query or "").strip()
    if not query:
        return empty_result(query, mode)
    similarity: dict[int, float] = {}
    if mode == "text":
        hits = await store.text_search(base.name, query_terms(query), top_k, wanted)
        order = [i for i, _ in hits]
        similarity = {i: s / (1.0 + s) for i, s in hits}
        used = None
    else:
        vector = await embedder.embed_one(query)
        used = embedder
        if mode == "vector":
            hits = await store.vector_search(base.name, vector, top_k, wanted)
            order = [i for i, _ in hits]
            similarity = dict(hits)
        else:
            depth = max(top_k * 4, 20)
            vec_hits = await store.vector_search(base.name, vector, depth, wanted)
            text_hits = await store.text_search(base.name, query_terms(query), depth, wanted)
            similarity = dict(vec_hits)
            fused = rrf([i for i, _ in vec_hits], [i for i, _ in text_hits])
            missing = [i for i in fused if i not in similarity]
            if missing:
                similarity.update(await store.similarities(base.name, vector, missing))
            order = sorted(fused, key=lambda i: -fused[i])
    if min_similarity is not None:
        order = [i for i in order if similarity.get(i, 0.0) >= min_similarity]
    order = order[:top_k]
    if mode == "hybrid":    # chosen by fusion, shown best first by the score they report
        order.sort(key=lambda i: -similarity.get(i, 0.0))
    if not order and wanted:
        # nothing found under a filter: say so when the filter can never match,
        # rather than answer an empty list the caller reads as "nothing relevant"
        problems = filter_problems(wanted, await store.list_documents(base.name),
                                   base.name.rpartition("/")[2])
        if problems:
            raise InvalidValue("; ".join(problems) + " - fix the filter, or tag the "
                                 "documents (`flowforge kb add ... --tag key=value`)")
    rows = await store.get_chunks(order)
    results = []
    for chunk_id in order:
        row = rows.get(chunk_id)
        if row is None:        # deleted between the search and the fetch
            continue
        created = dt.datetime.fromtimestamp(row.created_at, dt.timezone.utc).isoformat()
        results.append({
            "documentId": str(row.document_id),
            "documentName": row.document_name,
            "content": row.content,
            "chunkIndex": row.chunk_index,
            "similarity": round(float(similarity.get(chunk_id, 0.0)), 6),
            "metadata": {"tags": row.tags, "chunkId": str(chunk_id), "createdAt": created,
                         "source": row.source, "startChar": row.start, "endChar": row.end},
        })
    return {"results": results, "query": query, "totalResults": len(results), "mode": mode,
            "cost": _cost(used, query),
            "context": CONTEXT_SEPARATOR.join(r["content"] for r in results)}
