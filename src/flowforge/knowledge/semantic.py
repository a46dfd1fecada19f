"""Semantic routing: pick the candidate whose description is closest to the input.

Used by the router's `strategy: semantic` (and `hybrid`, which asks the LLM
only when the two best candidates are within a margin).  No LLM call: the
input and each candidate's text and example utterances are embedded with
the local model (milliseconds) and compared by cosine similarity.  A
candidate scores as the best of its text and its examples, so a few
examples of what users actually say sharpen a route more than a long
description.

    ranked = await rank_routes("I want my money back",
                               [{"id": "refunds", "text": "Refunds: money back for orders",
                                 "examples": ["refund my order", "I was charged twice"]},
                                {"id": "shipping", "text": "Shipping and delivery times"}])
    # [("refunds", 0.61), ("shipping", 0.18)]

Candidate embeddings are cached by text (in the embedder's cache), so a
router that runs for every request embeds only its input after the first.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from flowforge.knowledge.embeddings import Embedder, get_embedder

__all__ = ["rank_routes", "candidate_texts"]


def candidate_texts(candidate: Mapping[str, Any]) -> list[str]:
    """The texts that stand for a candidate: its text (or name + description)
    and its examples."""
    texts = []
    main = candidate.get("text") or " - ".join(
        str(candidate[k]) for k in ("name", "description") if candidate.get(k))
    if main and str(main).strip():
        texts.append(str(main).strip())
    for example in candidate.get("examples") or []:
        if str(example).strip():
            texts.append(str(example).strip())
    return texts or [str(candidate.get("id", ""))]


async def rank_routes(text: str, candidates: Sequence[Mapping[str, Any]],
                      embedder: Embedder | None = None) -> list[tuple[str, float]]:
    """(candidate id, similarity in -1..1), best first."""
    if not candidates:
        return []
    embedder = embedder or get_embedder()
    groups = [candidate_texts(c) for c in candidates]
    flat = [t for group in groups for t in group]
    vectors = await embedder.embed([text or ""] + flat)
    query, rest = vectors[0], vectors[1:]
    scores = rest @ query
    ranked, position = [], 0
    for candidate, group in zip(candidates, groups):
        best = float(np.max(scores[position:position + len(group)]))
        position += len(group)
        ranked.append((str(candidate.get("id")), round(best, 6)))
    ranked.sort(key=lambda item: -item[1])
    return ranked
