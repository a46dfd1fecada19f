"""Search: full text always; hybrid fuses embeddings of description +
use_when + tags (never the schemas) and falls back to text when embedding fails."""

from __future__ import annotations

import numpy as np
import pytest

from flowforge.knowledge.api import Knowledge
from flowforge.knowledge.embeddings import Embedder
from flowforge.registry import KnowledgeSearch, Registry


@pytest.fixture(params=["sqlite", "postgres"])
def registry_url(request, tmp_path) -> str:
    """Text search on both back ends (FTS5's bm25; PostgreSQL's ts_rank)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return request.getfixturevalue("postgres_schema_url")


async def test_text_search_finds_blocks_by_what_they_do(registry):
    assert registry.search_mode == "text"
    hits = await registry.search("count the words of an article", limit=3)
    assert hits[0].definition.id == "text_word_count"
    hits = await registry.search("how many days until the deadline", limit=3)
    assert hits[0].definition.id in ("date_diff", "date_shift")
    assert {h.definition.id for h in hits} >= {"date_diff", "date_shift"}


async def test_search_filters_by_execution_type(registry):
    hits = await registry.search("text summary words", limit=5, execution_type="llm")
    assert hits and all(h.definition.execution_type == "llm" for h in hits)


async def test_search_ignores_schemas(registry):
    # `stdev` and `top_words` are only field names in output schemas.
    assert await registry.search("stdev", limit=5) == []
    assert await registry.search("top_words", limit=5) == []


class KeywordEmbedder(Embedder):
    """A deterministic embedder: one dimension per keyword."""

    model = "fake/keywords"
    dimensions = 6
    words = ["money", "currency", "weather", "rain", "date"]

    def __init__(self):
        super().__init__()
        self.texts = []

    async def _embed_uncached(self, texts):
        self.texts.extend(texts)
        rows = []
        for text in texts:
            v = np.array([1.0 if w in text.lower() else 0.0 for w in self.words] + [0.01],
                         dtype=np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


class BrokenEmbedder(KeywordEmbedder):
    model = "fake/broken"

    async def _embed_uncached(self, texts):
        raise RuntimeError("no embedding model here")


async def registry_with(embedder) -> Registry:
    knowledge = await Knowledge.open("sqlite://:memory:")
    knowledge.embedder_for = lambda model: embedder
    registry = Registry.open(":memory:", search="text")
    registry.searcher = KnowledgeSearch(registry.store, knowledge)
    return registry


async def test_hybrid_search_finds_by_meaning_what_text_search_misses():
    embedder = KeywordEmbedder()
    registry = await registry_with(embedder)
    await registry.add({"id": "fx_convert", "name": "FX", "description": "Converts money between "
                        "currencies", "execution_type": "python", "tags": ["currency"],
                        "source_code": "async def execute(inputs, context):\n    return {}\n"})
    # No word of the query is in the block's text; only the embedding links them.
    assert await registry.store.text_search("moneylenders") == []
    hits = await registry.search("moneylenders", limit=3)
    assert hits[0].definition.id == "fx_convert" and hits[0].via == "hybrid"
    assert registry.search_mode == "hybrid"
    embedded = " ".join(embedder.texts)
    assert "Converts money between currencies" in embedded
    assert "properties" not in embedded and "async def" not in embedded
    # A changed block is re-indexed, a deleted one disappears.
    await registry.delete("fx_convert")
    assert "fx_convert" not in [h.definition.id for h in await registry.search("currency", 3)]


async def test_hybrid_search_falls_back_to_text_when_embedding_fails():
    registry = await registry_with(BrokenEmbedder())
    hits = await registry.search("summarise a long article", limit=3)
    assert hits[0].definition.id == "llm_summarise" and hits[0].via == "text"
    assert registry.search_mode == "text (embedding failed)"


async def test_hybrid_search_with_the_bundled_embedding_model(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{tmp_path / 'knowledge.db'}")
    registry = Registry.open(":memory:", search="hybrid")
    hits = await registry.search("condense a long report into a few sentences", limit=3)
    assert hits[0].definition.id == "llm_summarise"
    assert registry.search_mode == "hybrid"
