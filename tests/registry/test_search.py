"""Search: full text always; hybrid fuses embeddings of description +
use_when + tags (never the schemas) and falls back to text when embedding fails."""

from __future__ import annotations

import numpy as np

from flowforge.registry import HybridSearch, Registry


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


class KeywordEmbedder:
    """A deterministic embedder: one dimension per keyword."""

    name = "fake/keywords"
    words = ["money", "currency", "weather", "rain", "date"]

    def __init__(self):
        self.texts = []

    async def embed(self, texts):
        self.texts.extend(texts)
        rows = []
        for text in texts:
            v = np.array([1.0 if w in text.lower() else 0.0 for w in self.words] + [0.01])
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


async def test_hybrid_search_finds_by_meaning_what_text_search_misses(tmp_path):
    embedder = KeywordEmbedder()
    registry = Registry.open(":memory:", search="text")
    registry.searcher = HybridSearch(registry.store, embedder)
    registry.add({"id": "fx_convert", "name": "FX", "description": "Converts money between "
                  "currencies", "execution_type": "python", "tags": ["currency"],
                  "source_code": "async def execute(inputs, context):\n    return {}\n"})
    # "currency" is not a word of the query; only the embedding links them.
    hits = await registry.search("currency rates", limit=3)
    assert hits[0].definition.id == "fx_convert" and "vector" in hits[0].via
    assert registry.search_mode == "hybrid"
    embedded = " ".join(embedder.texts)
    assert "Converts money between currencies" in embedded
    assert "properties" not in embedded and "async def" not in embedded


class BrokenEmbedder:
    name = "fake/broken"

    async def embed(self, texts):
        raise RuntimeError("no embedding model here")


async def test_hybrid_search_falls_back_to_text_when_embedding_fails():
    registry = Registry.open(":memory:", search="text")
    registry.searcher = HybridSearch(registry.store, BrokenEmbedder())
    hits = await registry.search("summarise a long article", limit=3)
    assert hits[0].definition.id == "llm_summarise" and hits[0].via == "text"
    assert registry.search_mode == "text (embedding failed)"


async def test_hybrid_search_with_the_bundled_embedding_model():
    registry = Registry.open(":memory:", search="hybrid")
    hits = await registry.search("condense a long report into a few sentences", limit=3)
    assert hits[0].definition.id == "llm_summarise"
    assert registry.search_mode == "hybrid"
