"""The offline model must be the real all-MiniLM-L6-v2: its vectors are compared
with reference vectors computed once from the original model by
sentence-transformers (torch, fp32; data/minilm_reference.json)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from flowforge.errors import FlowforgeError, MissingCredentials
from flowforge.knowledge.embeddings import OpenAIEmbedder, get_embedder, normalise_model_name

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


async def test_local_vectors_match_the_reference_model():
    texts = [item["text"] for item in REFERENCE["items"]]
    expected = np.array([item["vector"] for item in REFERENCE["items"]], dtype=np.float32)
    vectors = await get_embedder().embed(texts)
    assert vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    cosines = (vectors * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() >= 0.999, cosines      # includes a text longer than 256 tokens
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_batching_does_not_change_a_vector():
    embedder = get_embedder()
    alone = embedder.embed_sync(["short"])[0]
    batched = embedder.embed_sync(["short", "a much longer sentence that forces padding " * 5])[0]
    assert float(alone @ batched) > 0.9999


async def test_meaning_not_just_words():
    embedder = get_embedder()
    q, near, far = await embedder.embed(["I want my money back", "How do refunds work?",
                                         "The roses need pruning in spring"])
    assert q @ near > q @ far + 0.2


def test_model_names():
    assert normalise_model_name(None) == "local/all-minilm-l6-v2"
    assert normalise_model_name("sentence-transformers/all-MiniLM-L6-v2") == "local/all-minilm-l6-v2"
    assert normalise_model_name("text-embedding-3-small") == "openai/text-embedding-3-small"
    with pytest.raises(FlowforgeError, match="unknown embedding model"):
        get_embedder("word2vec")


async def test_openai_compatible_embeddings_over_http():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((str(request.url), request.headers.get("authorization"), body))
        data = [{"index": i, "embedding": [3.0, 4.0] if "a" in text else [1.0, 0.0]}
                for i, text in reversed(list(enumerate(body["input"])))]
        return httpx.Response(200, json={"data": data})

    embedder = OpenAIEmbedder("openai-compatible/nomic-embed-text",
                              base_url="http://127.0.0.1:11434/v1", api_key="k",
                              transport=httpx.MockTransport(handler))
    vectors = await embedder.embed(["a", "b", "a"])
    assert seen == [("http://127.0.0.1:11434/v1/embeddings", "Bearer k",
                     {"model": "nomic-embed-text", "input": ["a", "b"]})]   # duplicates sent once
    assert np.allclose(vectors, [[0.6, 0.8], [1.0, 0.0], [0.6, 0.8]])
    assert embedder.dimensions == 2


async def test_openai_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    embedder = OpenAIEmbedder("openai/text-embedding-3-small",
                              transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    assert embedder.dimensions == 1536
    with pytest.raises(MissingCredentials, match="OPENAI_API_KEY"):
        await embedder.embed(["x"])
