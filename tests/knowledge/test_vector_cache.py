"""A built vector index is kept beside its SQLite base: the next process maps
it instead of rebuilding (1.8 s at 100k chunks), and never uses a stale one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flowforge.knowledge import vector_cache, vectors
from flowforge.knowledge.store import DocumentInfo, KnowledgeBase, NewChunk
from flowforge.knowledge.store_sqlite import SQLiteKnowledgeStore

DIMS = 16


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch):
    # The real thresholds are 20k rows; the mechanism is the same with fewer.
    monkeypatch.setattr(vector_cache, "CACHE_MIN_ROWS", 100)
    monkeypatch.setattr(vectors, "IVF_MIN_ROWS", 200)         # IVF lists, centroids too


def unit(rng, n):
    v = rng.normal(size=(n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


async def opened(path: Path) -> SQLiteKnowledgeStore:
    store = SQLiteKnowledgeStore(path)
    await store.open()
    return store


async def new_base(path: Path, rng, documents: int) -> SQLiteKnowledgeStore:
    """An open store at `path` whose base `kb` holds `documents` x 10 vectors."""
    store = await opened(path)
    await store.create_base(KnowledgeBase("kb", "test/none", DIMS, 200, 30))
    await add_docs(store, rng, 0, documents)
    return store


async def add_docs(store, rng, first: int, count: int) -> None:
    for d in range(first, first + count):
        doc = DocumentInfo(0, "kb", f"doc-{d}", f"src:{d}", {}, f"h{d}")
        chunks = [NewChunk(i, f"chunk {d}.{i}", 0, 5) for i in range(10)]
        await store.put_document(doc, chunks, unit(rng, 10))


async def test_the_next_process_maps_the_index_and_gets_the_same_answers(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    path = tmp_path / "k.db"
    first = await new_base(path, rng, 40)                               # 400 vectors
    queries = unit(rng, 5)
    expected = [await first.vector_search("kb", q, 10, None) for q in queries]
    await first.close()
    assert any(Path(f"{path}.vectors").iterdir())

    def no_rebuild(self):
        raise AssertionError("the cached index should have been used")

    monkeypatch.setattr(vectors.VectorIndex, "rebuild", no_rebuild)
    second = await opened(path)
    try:
        got = [await second.vector_search("kb", q, 10, None) for q in queries]
    finally:
        await second.close()
    assert got == expected


async def test_a_changed_base_is_rebuilt_not_read_from_a_stale_cache(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "k.db"
    store = await new_base(path, rng, 30)
    probe = unit(rng, 1)[0]
    await store.vector_search("kb", probe, 5, None)                # builds and caches
    await add_docs(store, rng, 30, 1)                              # another process's write
    newest = (await store.list_documents("kb"))[-1]
    vector = (await store.document_vectors(newest.id))
    target = next(iter(vector.values()))
    await store.close()
    fresh = await opened(path)
    try:
        hits = await fresh.vector_search("kb", target, 1, None)
        stats = await fresh.get_chunks([hits[0][0]])
    finally:
        await fresh.close()
    assert stats[hits[0][0]].document_id == newest.id


async def test_an_unreadable_cache_falls_back_to_building_the_index(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "k.db"
    store = await new_base(path, rng, 20)
    query = unit(rng, 1)[0]
    expected = await store.vector_search("kb", query, 5, None)
    await store.close()
    for cached in Path(f"{path}.vectors").rglob("base.npy"):
        cached.write_bytes(b"not an array")
    again = await opened(path)
    try:
        assert await again.vector_search("kb", query, 5, None) == expected
        assert await again.delete_base("kb") is True
    finally:
        await again.close()
    assert not any(Path(f"{path}.vectors").iterdir())             # deleted with its base
