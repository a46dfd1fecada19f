"""An in-memory vector index kept beside the durable SQLite store.

Why: an exact scan inside SQLite costs 60-95 ms at 100k chunks on two cores;
a NumPy matrix of unit vectors answers the same question in a few ms, and an
inverted-file (IVF) layer over it keeps large bases fast.

Layout: the *base* holds rows sorted by their IVF list (contiguous slices,
no copying at query time); new rows go to a small *tail* that is always
scanned exactly; deleted rows are masked.  When the tail or the deleted rows
grow past a fraction of the base, the index is rebuilt (k-means retrained
only when the base has grown a lot since the last training).

Filters act inside the search: the caller passes the allowed document ids.
A selective filter (few allowed rows) is answered by an exact scan of just
those rows; a broad one probes more IVF lists in proportion to how much it
removes, and keeps probing until `k` allowed rows are found - so a filtered
query never returns fewer results than exist.
"""

from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

__all__ = ["VectorIndex"]

IVF_MIN_ROWS = 20_000        # below this, exact search is fast enough (< 3 ms)
EXACT_FILTER_ROWS = 12_000   # a filter allowing fewer rows than this is scanned exactly
BASE_PROBE_FRACTION = 0.12   # share of IVF lists probed for an unfiltered query


_CONTROLLER = None


def _one_blas_thread():
    """A matrix-vector product is memory-bound: OpenBLAS's threads only add
    hand-offs, and on a busy machine they spin (measured: 15 ms instead of 3 ms
    at 10k rows under load). Queries run single-threaded; index builds do not."""
    global _CONTROLLER
    try:
        if _CONTROLLER is None:
            from threadpoolctl import ThreadpoolController
            _CONTROLLER = ThreadpoolController()
        return _CONTROLLER.limit(limits=1, user_api="blas")
    except ImportError:
        return contextlib.nullcontext()


def _doc_mask(docs: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Rows whose document is allowed: a lookup table beats np.isin's sort."""
    if not len(docs) or not len(allowed):
        return np.zeros(len(docs), bool)
    table = np.zeros(int(max(docs.max(), allowed.max())) + 1, bool)
    table[allowed] = True
    return table[docs]


def _topk(scores: np.ndarray, k: int) -> np.ndarray:
    if scores.size <= k:
        return np.argsort(-scores)
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part])]


class VectorIndex:
    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.lock = threading.RLock()
        empty = np.zeros((0, dimensions), dtype=np.float32)
        self.base, self.base_ids, self.base_docs = empty, np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.base_alive = np.zeros(0, bool)
        self.offsets = np.zeros(1, np.int64)
        self.centroids: np.ndarray | None = None
        self.trained_rows = 0
        self.tail: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._tail_cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.tail_dead: set[int] = set()
        self.position: dict[int, int] = {}   # id -> row in base (tail rows are not listed)
        self.dead = 0
        self._filter_cache: dict[bytes, tuple] = {}

    def __len__(self) -> int:
        return int(self.base_alive.sum()) + sum(len(ids) for ids, _, _ in self.tail) - len(self.tail_dead)

    # -- writes -----------------------------------------------------------------------
    def add(self, ids: np.ndarray, docs: np.ndarray, vectors: np.ndarray) -> None:
        with self.lock:
            if len(ids):
                self.tail.append((np.asarray(ids, np.int64), np.asarray(docs, np.int64),
                                  np.ascontiguousarray(vectors, dtype=np.float32)))
                self._tail_cache = None
            self._maybe_rebuild()

    def remove(self, ids) -> None:
        with self.lock:
            for chunk_id in ids:
                row = self.position.pop(int(chunk_id), None)
                if row is not None:
                    self.base_alive[row] = False
                    self.dead += 1
                    self._filter_cache.clear()
                else:
                    self.tail_dead.add(int(chunk_id))
            self._maybe_rebuild()

    def _tail(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._tail_cache is None:
            if self.tail:
                self._tail_cache = (np.concatenate([t[0] for t in self.tail]),
                                    np.concatenate([t[1] for t in self.tail]),
                                    np.vstack([t[2] for t in self.tail]))
            else:
                self._tail_cache = (np.zeros(0, np.int64), np.zeros(0, np.int64),
                                    np.zeros((0, self.dimensions), np.float32))
        return self._tail_cache

    def _maybe_rebuild(self) -> None:
        tail_rows = sum(len(t[0]) for t in self.tail)
        size = len(self.base_ids)
        if tail_rows > max(2_000, size // 10) or self.dead > max(1_000, size // 5):
            self.rebuild()

    def rebuild(self) -> None:
        """Fold the tail in, drop deleted rows, (re)train the IVF lists if big enough."""
        with self.lock:
            t_ids, t_docs, t_vecs = self._tail()
            keep_tail = np.array([i not in self.tail_dead for i in t_ids.tolist()], dtype=bool)
            ids = np.concatenate([self.base_ids[self.base_alive], t_ids[keep_tail]])
            docs = np.concatenate([self.base_docs[self.base_alive], t_docs[keep_tail]])
            vecs = np.vstack([self.base[self.base_alive], t_vecs[keep_tail]])
            n = len(ids)
            if n >= IVF_MIN_ROWS:
                if self.centroids is None or n > 2 * self.trained_rows:
                    self.centroids = self._train(vecs)
                    self.trained_rows = n
                lists = self._assign(vecs)
                order = np.argsort(lists, kind="stable")
                ids, docs, vecs = ids[order], docs[order], vecs[order]
                counts = np.bincount(lists, minlength=len(self.centroids))
                self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            else:
                self.centroids, self.trained_rows = None, 0
                self.offsets = np.array([0, n], np.int64)
            self.base, self.base_ids, self.base_docs = np.ascontiguousarray(vecs), ids, docs
            self.base_alive = np.ones(n, bool)
            self.position = dict(zip(ids.tolist(), range(n)))
            self.tail, self._tail_cache, self.tail_dead, self.dead = [], None, set(), 0
            self._filter_cache.clear()

    def _train(self, vecs: np.ndarray) -> np.ndarray:
        """Spherical k-means on a sample: ~sqrt(n) lists (a few seconds at 100k rows)."""
        rng = np.random.default_rng(0)
        nlist = max(16, int(math.sqrt(len(vecs))))
        sample = vecs[rng.choice(len(vecs), size=min(len(vecs), nlist * 30), replace=False)]
        centroids = sample[rng.choice(len(sample), size=nlist, replace=False)].copy()
        for _ in range(8):
            assign = np.argmax(sample @ centroids.T, axis=1)
            sums = np.zeros_like(centroids)
            np.add.at(sums, assign, sample)
            empty = np.bincount(assign, minlength=nlist) == 0
            sums[empty] = sample[rng.choice(len(sample), size=int(empty.sum()), replace=False)]
            centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
        return centroids.astype(np.float32)

    def _assign(self, vecs: np.ndarray) -> np.ndarray:
        out = np.empty(len(vecs), np.int64)
        for start in range(0, len(vecs), 16_384):
            out[start:start + 16_384] = np.argmax(vecs[start:start + 16_384] @ self.centroids.T, 1)
        return out

    # -- reads ------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int,
               allowed_docs: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top `k` (id, cosine). `allowed_docs` is a sorted array of document ids,
        or None for no filter."""
        query = np.asarray(query, dtype=np.float32)
        with self.lock, _one_blas_thread():
            found_ids: list[np.ndarray] = []
            found_scores: list[np.ndarray] = []
            t_ids, t_docs, t_vecs = self._tail()
            if len(t_ids):
                keep = np.ones(len(t_ids), bool)
                if self.tail_dead:
                    keep &= ~np.isin(t_ids, list(self.tail_dead))
                if allowed_docs is not None:
                    keep &= _doc_mask(t_docs, allowed_docs)
                found_ids.append(t_ids[keep])
                found_scores.append(t_vecs[keep] @ query)
            if len(self.base_ids):
                ids, scores = self._search_base(query, k, allowed_docs)
                found_ids.append(ids)
                found_scores.append(scores)
            if not found_ids:
                return []
            ids = np.concatenate(found_ids)
            scores = np.concatenate(found_scores)
            best = _topk(scores, k)
            return [(int(ids[i]), float(scores[i])) for i in best]

    def _filtered(self, allowed_docs: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(mask over base rows, compact copy of the allowed rows if few) for a
        filter, cached: workflows repeat the same filters, and copying the allowed
        rows once makes each later query a small contiguous scan."""
        key = allowed_docs.tobytes()
        found = self._filter_cache.get(key)
        if found is None:
            mask = self.base_alive & _doc_mask(self.base_docs, allowed_docs)
            rows = np.flatnonzero(mask)
            compact = None
            if len(rows) <= EXACT_FILTER_ROWS or self.centroids is None:
                compact = (rows, np.ascontiguousarray(self.base[rows]))
            if len(self._filter_cache) >= 16:
                self._filter_cache.pop(next(iter(self._filter_cache)))
            found = self._filter_cache[key] = (mask, compact)
        return found

    def _search_base(self, query: np.ndarray, k: int, allowed_docs: np.ndarray | None):
        compact = None
        if allowed_docs is not None:
            mask, compact = self._filtered(allowed_docs)
        else:
            mask = None if self.dead == 0 else self.base_alive
        if compact is not None:
            rows, matrix = compact
            scores = matrix @ query
            best = _topk(scores, k)
            return self.base_ids[rows[best]], scores[best]
        if self.centroids is None:
            scores = self.base @ query
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            best = _topk(scores, min(k, int(len(scores) if mask is None else mask.sum())))
            return self.base_ids[best], scores[best]
        # IVF: probe lists nearest first; widen in proportion to what the filter removes.
        nlist = len(self.centroids)
        allowed = len(self.base_ids) if mask is None else int(mask.sum())
        share = max(allowed / max(len(self.base_ids), 1), 1e-6)
        probe = min(nlist, max(1, math.ceil(nlist * BASE_PROBE_FRACTION / share)))
        order = np.argsort(-(self.centroids @ query))
        ids_parts, score_parts, found, probed = [], [], 0, 0
        while probed < nlist:
            for lst in order[probed:probe]:
                a, b = self.offsets[lst], self.offsets[lst + 1]
                if a == b:
                    continue
                if mask is None:
                    ids_parts.append(self.base_ids[a:b])
                    score_parts.append(self.base[a:b] @ query)
                    found += b - a
                else:   # score the whole list (contiguous), keep the allowed rows
                    keep = mask[a:b]
                    count = int(keep.sum())
                    if count:
                        ids_parts.append(self.base_ids[a:b][keep])
                        score_parts.append((self.base[a:b] @ query)[keep])
                        found += count
            probed = probe
            if found >= k:
                break
            probe = min(nlist, probe * 2)
        if not ids_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        ids = np.concatenate(ids_parts)
        scores = np.concatenate(score_parts)
        best = _topk(scores, k)
        return ids[best], scores[best]

    def vectors_for(self, ids: list[int]) -> dict[int, np.ndarray]:
        with self.lock:
            out = {}
            for chunk_id in ids:
                row = self.position.get(chunk_id)
                if row is not None and self.base_alive[row]:
                    out[chunk_id] = self.base[row]
            missing = [i for i in ids if i not in out]
            if missing:
                t_ids, _, t_vecs = self._tail()
                where = {int(v): n for n, v in enumerate(t_ids.tolist())}
                for chunk_id in missing:
                    if chunk_id in where and chunk_id not in self.tail_dead:
                        out[chunk_id] = t_vecs[where[chunk_id]]
            return out
