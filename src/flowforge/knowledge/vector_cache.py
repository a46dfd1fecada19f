"""A built vector index, kept on disk beside its SQLite knowledge base.

Why: each process builds the in-memory index (`vectors.VectorIndex`) on its
first query, which at 100k chunks costs ~1.8 s (reading every vector, k-means,
sorting into lists).  A CLI run pays that every time.  Once built, the
index's arrays are written next to the database (`<db>.vectors/`) under a
stamp of the base's state (its version, vector count and highest chunk id);
a later process whose base has the same stamp maps them from disk instead.
Any other stamp, a missing or unreadable file: the index is rebuilt as
before and the cache rewritten.  Writes go to a temporary folder that is
renamed into place, so a reader never sees half a cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from flowforge.knowledge.vectors import VectorIndex

__all__ = ["CACHE_MIN_ROWS", "load_index", "save_index", "forget_index"]

#: Smaller bases build in well under 0.1 s: not worth a file.
CACHE_MIN_ROWS = 20_000
_ARRAYS = ("base", "base_ids", "base_docs", "offsets")


def _folder(db_path: str, kb: str) -> Path:
    digest = hashlib.sha256(kb.encode()).hexdigest()[:16]
    return Path(f"{db_path}.vectors") / digest


def load_index(db_path: str, kb: str, stamp: tuple) -> VectorIndex | None:
    """The cached index of `kb` if its stamp matches, else None."""
    folder = _folder(db_path, kb)
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("kb") != kb or tuple(meta.get("stamp", ())) != tuple(stamp):
            return None
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r" if name == "base"
                                else None, allow_pickle=False) for name in _ARRAYS}
        centroids = np.load(folder / "centroids.npy", allow_pickle=False) \
            if meta.get("trained_rows") else None
    except (OSError, ValueError, KeyError):
        return None
    base, rows = arrays["base"], len(arrays["base_ids"])
    if base.ndim != 2 or len(base) != rows or len(arrays["base_docs"]) != rows or \
            int(arrays["offsets"][-1]) != rows:
        return None
    index = VectorIndex(int(base.shape[1]) or 1)
    index.base, index.base_ids, index.base_docs = base, arrays["base_ids"], arrays["base_docs"]
    index.offsets, index.centroids = arrays["offsets"], centroids
    index.trained_rows = int(meta.get("trained_rows") or 0)
    index.base_alive = np.ones(len(base), bool)
    index.position = dict(zip(index.base_ids.tolist(), range(len(base))))
    return index


def save_index(db_path: str, kb: str, stamp: tuple, index: VectorIndex) -> None:
    """Write `index` (freshly rebuilt: no tail, no deleted rows) for `kb`; a
    failure to write only means the next process rebuilds."""
    folder = _folder(db_path, kb)
    staging = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        for name in _ARRAYS:
            np.save(staging / f"{name}.npy", np.ascontiguousarray(getattr(index, name)))
        if index.centroids is not None:
            np.save(staging / "centroids.npy", index.centroids)
        (staging / "meta.json").write_text(json.dumps(
            {"kb": kb, "stamp": list(stamp), "trained_rows": index.trained_rows}))
        old = None
        if folder.exists():
            old = folder.with_name(f".old-{os.getpid()}-{folder.name}")
            os.replace(folder, old)
        os.replace(staging, folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def forget_index(db_path: str, kb: str) -> None:
    """Remove `kb`'s cached index (the base was deleted)."""
    shutil.rmtree(_folder(db_path, kb), ignore_errors=True)
