"""The in-memory index beside SQLite: IVF recall against exact search, filters
inside the search, and writes (tail, deletes, rebuilds)."""

from __future__ import annotations

import numpy as np

from flowforge.knowledge import vectors
from flowforge.knowledge.vectors import VectorIndex


def clustered(n: int, dims: int = 64, clusters: int = 50, seed: int = 1):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dims))
    points = centres[rng.integers(0, clusters, n)] + rng.normal(scale=0.6, size=(n, dims))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32)


def exact(matrix, ids, query, k, allowed_rows=None):
    scores = matrix @ query
    if allowed_rows is not None:
        scores = np.where(allowed_rows, scores, -np.inf)
    order = np.argsort(-scores)[:k]
    return [int(ids[i]) for i in order if np.isfinite(scores[i])]


def build(n=30_000):
    matrix = clustered(n)
    ids = np.arange(1, n + 1, dtype=np.int64)
    docs = ids // 10                      # 10 chunks per document
    index = VectorIndex(matrix.shape[1])
    index.add(ids, docs, matrix)
    index.rebuild()
    return index, matrix, ids, docs


def test_ivf_recall_unfiltered_and_filtered():
    index, matrix, ids, docs = build()
    assert index.centroids is not None                 # large enough for IVF
    queries = clustered(50, seed=7)
    allowed_docs = np.arange(0, docs.max() + 1, 3)     # a third of the documents
    allowed_rows = np.isin(docs, allowed_docs)
    hits = hits_f = 0
    for q in queries:
        truth = set(exact(matrix, ids, q, 10))
        hits += len(truth & {i for i, _ in index.search(q, 10)})
        truth_f = set(exact(matrix, ids, q, 10, allowed_rows))
        got_f = index.search(q, 10, allowed_docs)
        assert len(got_f) == 10 and all(docs[i - 1] % 3 == 0 for i, _ in got_f)
        hits_f += len(truth_f & {i for i, _ in got_f})
    assert hits / 500 >= 0.95 and hits_f / 500 >= 0.95


def test_selective_filter_is_exact_and_never_short():
    index, matrix, ids, docs = build()
    allowed_docs = np.array([5, 900, 2500])            # 30 rows out of 30k
    q = clustered(1, seed=3)[0]
    got = index.search(q, 25, allowed_docs)
    assert [i for i, _ in got] == exact(matrix, ids, q, 25, np.isin(docs, allowed_docs))


def test_tail_deletes_and_rebuild(monkeypatch):
    monkeypatch.setattr(vectors, "IVF_MIN_ROWS", 1000)
    index, matrix, ids, docs = build(3000)
    extra = clustered(10, seed=9)
    index.add(np.arange(10_001, 10_011), np.full(10, 77_777), extra)
    assert index.search(extra[3], 1)[0][0] == 10_004                      # found in the tail
    index.remove([10_004, 1, 2])
    assert 10_004 not in {i for i, _ in index.search(extra[3], 5)}
    assert index.search(matrix[0], 1)[0][0] != 1
    assert len(index) == 3000 + 10 - 3
    index.rebuild()
    assert len(index) == 3007 and index.search(extra[5], 1)[0][0] == 10_006
    assert index.search(extra[5], 3, np.array([77_777]))[0][0] == 10_006
