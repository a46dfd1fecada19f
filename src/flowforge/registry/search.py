"""Finding blocks by what they do: full text, or hybrid (text + embeddings).

Only a block's description, use_when and tags are embedded, never its
schemas (field names would make every block with a `text` input look
alike).  `HybridSearch` fuses the text ranking and the vector ranking by
reciprocal rank; when embedding fails (no model, no network for a hosted
embedder) it logs why once and answers from the text index alone, so
search never breaks because of embeddings.

The embedder comes from the knowledge layer (`knowledge.embeddings`);
anything with `async embed(texts) -> unit vectors` and a `name` works.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from flowforge.registry.store import BlockStore

__all__ = ["BlockSearch", "TextSearch", "HybridSearch", "Hit"]

log = logging.getLogger(__name__)
_RRF_K = 60
_MIN_COSINE = 0.25


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    via: str               # "text", "vector" or "text+vector"


class BlockSearch(Protocol):
    """The search interface the registry calls."""

    mode: str

    async def search(self, query: str, limit: int) -> list[Hit]: ...


class TextSearch:
    """bm25 over SQLite FTS5."""

    mode = "text"

    def __init__(self, store: BlockStore) -> None:
        self.store = store

    async def search(self, query: str, limit: int) -> list[Hit]:
        return [Hit(block_id, score, "text")
                for block_id, score in self.store.text_search(query, limit)]


class HybridSearch:
    """Text ranking fused with cosine similarity of embeddings."""

    mode = "hybrid"

    def __init__(self, store: BlockStore, embedder: Any = None, model: str | None = None) -> None:
        self.store = store
        self._embedder = embedder
        self.model = model
        self.failed: str | None = None
        self.text = TextSearch(store)

    def _get_embedder(self) -> Any:
        if self._embedder is None:
            from flowforge.knowledge.embeddings import get_embedder
            self._embedder = get_embedder(self.model)
        return self._embedder

    async def _vector_hits(self, query: str, limit: int) -> list[tuple[str, float]]:
        import numpy as np

        embedder = self._get_embedder()
        name = getattr(embedder, "name", None) or self.model or type(embedder).__name__
        rows = self.store.vectors(name)
        known = {block_id for block_id, _, _ in rows}
        missing = [block_id for block_id in self.store.ids() if block_id not in known]
        if missing:
            definitions = [self.store.get(block_id) for block_id in missing]
            texts = [d.search_text() for d in definitions if d is not None]
            vectors = np.asarray(await embedder.embed(texts), dtype=np.float32)
            for definition, text, vector in zip([d for d in definitions if d], texts, vectors):
                self.store.put_vector(definition.id, name, text, vector.tobytes())
            rows = self.store.vectors(name)
        if not rows:
            return []
        query_vector = np.asarray(await embedder.embed([query]), dtype=np.float32)[0]
        matrix = np.stack([np.frombuffer(blob, dtype=np.float32) for _, _, blob in rows])
        scores = matrix @ query_vector
        order = np.argsort(-scores)[:limit]
        return [(rows[i][0], float(scores[i])) for i in order if scores[i] >= _MIN_COSINE]

    async def search(self, query: str, limit: int) -> list[Hit]:
        text_hits = self.store.text_search(query, limit * 2)
        try:
            vector_hits = await self._vector_hits(query, limit * 2)
        except Exception as exc:        # any embedding failure: answer from text alone
            if self.failed is None:
                log.warning("block search falls back to full text: embedding failed (%s)", exc)
            self.failed = str(exc)
            return [Hit(block_id, score, "text") for block_id, score in text_hits[:limit]]
        fused: dict[str, float] = {}
        via: dict[str, set[str]] = {}
        for source, hits in (("text", text_hits), ("vector", vector_hits)):
            for rank, (block_id, _) in enumerate(hits):
                fused[block_id] = fused.get(block_id, 0.0) + 1.0 / (_RRF_K + rank + 1)
                via.setdefault(block_id, set()).add(source)
        ranked = sorted(fused.items(), key=lambda item: -item[1])[:limit]
        return [Hit(block_id, round(score, 6), "+".join(sorted(via[block_id])))
                for block_id, score in ranked]
