"""Knowledge benchmark: ingestion throughput and query latency/recall.

    .venv/bin/python bench/knowledge.py [--sizes 10000,100000] [--backends sqlite,postgres]

Prints, and writes nothing else (its databases live in temporary folders,
its PostgreSQL is a throwaway server from scripts/pgvector_server.py):

- ingestion: chunks/s through `Knowledge.add_documents` with the real
  offline embedding model (chunking + embedding + storing);
- per back end and size: p50/p95 latency of `search()` in vector, text,
  hybrid and filtered-hybrid modes, on synthetic clustered 384-d vectors
  and Zipf-distributed words (the query's embedding is precomputed: the
  model's ~5 ms per query is reported separately);
- recall@10 of vector search (unfiltered and filtered) against exact NumPy search.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from flowforge.knowledge.api import Knowledge  # noqa: E402
from flowforge.knowledge.embeddings import Embedder, get_embedder  # noqa: E402
from flowforge.knowledge.ingest import SourceDocument  # noqa: E402
from flowforge.knowledge.search import search  # noqa: E402
from flowforge.knowledge.store import DocumentInfo, KnowledgeBase, NewChunk  # noqa: E402
from flowforge.knowledge.store import knowledge_store_from_url  # noqa: E402

DIMS = 384
CHUNKS_PER_DOC = 100
CATEGORIES = ["policies", "legal", "faq", "product", "internal"]
CATEGORY_SHARE = [0.40, 0.30, 0.15, 0.10, 0.05]
VOCABULARY = 20_000
WORDS_PER_CHUNK = 60


class PrecomputedEmbedder(Embedder):
    """Maps each benchmark query text to its synthetic vector."""

    model = "local/all-minilm-l6-v2"
    dimensions = DIMS

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.table = table

    async def _embed_uncached(self, texts):
        return np.vstack([self.table[t] for t in texts])


def synthetic(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(50, n // 500), DIMS)).astype(np.float32)
    labels = rng.integers(0, len(centres), n)
    vectors = centres[labels] + rng.normal(scale=0.9, size=(n, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ranks = np.minimum(rng.zipf(1.3, size=(n, WORDS_PER_CHUNK)), VOCABULARY)
    texts = [" ".join(f"w{r}" for r in row) for row in ranks]
    docs = n // CHUNKS_PER_DOC
    categories = rng.choice(len(CATEGORIES), size=docs, p=CATEGORY_SHARE)
    return vectors, texts, categories


async def load(store, n: int):
    vectors, texts, categories = synthetic(n)
    await store.create_base(KnowledgeBase("bench", "local/all-minilm-l6-v2", DIMS, 200, 30))
    postgres = hasattr(store, "conn")
    if postgres:   # bulk load: build the HNSW index once at the end, not row by row
        from flowforge.knowledge.store_postgres import _index_name
        await store.conn.execute(f"DROP INDEX {_index_name('bench')}")
    started = time.perf_counter()
    for d in range(n // CHUNKS_PER_DOC):
        rows = slice(d * CHUNKS_PER_DOC, (d + 1) * CHUNKS_PER_DOC)
        doc = DocumentInfo(0, "bench", f"doc-{d}", f"bench:{d}",
                           {"category": [CATEGORIES[categories[d]]]}, f"h{d}")
        chunks = [NewChunk(i, t, 0, len(t)) for i, t in enumerate(texts[rows])]
        await store.put_document(doc, chunks, vectors[rows])
    if postgres:
        await store.conn.execute("SET maintenance_work_mem = '512MB'")
        await store._create_index("bench", DIMS)
        await store.conn.execute("ANALYZE kb_chunks")
    return vectors, categories, time.perf_counter() - started


def queries(vectors: np.ndarray, count: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(vectors), count)
    qv = vectors[picks] + rng.normal(scale=0.05, size=(count, DIMS)).astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    # Content words: stop-word-like ranks (the commonest 20) are what query_terms drops.
    words = rng.integers(20, 3000, size=(count, 3))
    texts = [f"q{i} " + " ".join(f"w{w}" for w in row) for i, row in enumerate(words)]
    return texts, qv


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def measure(store, n: int, count: int) -> None:
    vectors, categories, load_s = await load(store, n)
    texts, qv = queries(vectors, count)
    embedder = PrecomputedEmbedder(dict(zip(texts, qv)))
    base = await store.get_base("bench")
    started = time.perf_counter()
    await store.vector_search("bench", qv[0], 10, None)          # loads / warms the index
    warm = time.perf_counter() - started
    doc_of_row = np.arange(n) // CHUNKS_PER_DOC
    selective = {"category": ["product"]}                          # ~10% of chunks
    broad = {"category": ["policies", "legal"]}                    # ~70% of chunks
    modes = [("vector", "vector", None), ("text", "text", None), ("hybrid", "hybrid", None),
             ("hybrid + filter 10%", "hybrid", selective),
             ("hybrid + filter 70%", "hybrid", broad)]
    print(f"  {n:>7} chunks: load {load_s:6.1f} s ({n / load_s:,.0f} chunks/s), "
          f"first query {warm * 1000:,.0f} ms (index load)")
    for label, mode, filters in modes:
        times = []
        for text in texts:
            t0 = time.perf_counter()
            await search(store, embedder, base, text, top_k=10, filters=filters, mode=mode)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"    {label:<22} p50 {pct(times, 50):6.2f} ms   p95 {pct(times, 95):6.2f} ms")
    for label, filters, allowed_cat in (("vector", None, None),
                                        ("vector + filter 10%", selective, [3]),
                                        ("vector + filter 70%", broad, [0, 1])):
        mask = None if allowed_cat is None else np.isin(categories[doc_of_row], allowed_cat)
        hits = 0
        for q in qv:
            scores = vectors @ q
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            truth = set((np.argsort(-scores)[:10] + 1).tolist())   # row r -> chunk id r+1
            got = await store.vector_search("bench", q, 10, filters)
            hits += len(truth & {i for i, _ in got})
        print(f"    recall@10 {label:<22} {hits / (10 * len(qv)):.3f}")


async def ingestion(seconds_budget: float = 60.0) -> None:
    sentences = [
        "Customers may return unused items within {n} days of delivery for a full refund.",
        "Refunds are issued to the original payment method within {n} business days.",
        "Express shipping to region {n} takes two to four business days.",
        "The warranty covers manufacturing defects for {n} months from the date of purchase.",
        "Personal data is kept for {n} months and then deleted, unless the law requires more.",
        "Gift cards are valid for {n} years and cannot be exchanged for cash.",
    ]
    rng = np.random.default_rng(3)
    docs = []
    for d in range(40):
        paragraphs = ["\n".join(" ".join(sentences[rng.integers(len(sentences))].format(
            n=int(rng.integers(2, 90))) for _ in range(4)) for _ in range(3))
            for _ in range(8)]
        docs.append(SourceDocument(f"doc-{d}", f"bench:{d}", "\n\n".join(paragraphs),
                                   {"category": ["policies"]}))
    folder = tempfile.mkdtemp(prefix="flowforge-bench-kb-")
    try:
        store = knowledge_store_from_url(f"sqlite:///{folder}/k.db")
        await store.open()
        kb = Knowledge(store)
        await kb.create("ingest")
        embedder = get_embedder()
        embedder.embed_sync(["warm up"])
        t0 = time.perf_counter()
        report = await kb.add_documents("ingest", docs)
        elapsed = time.perf_counter() - t0
        times = []
        for text in ["Can I get a refund after three weeks?", "How long is the warranty?"] * 10:
            embedder._cache.clear()
            t1 = time.perf_counter()
            await embedder.embed_one(text)
            times.append((time.perf_counter() - t1) * 1000)
        print(f"ingestion (real embeddings, {get_embedder().model}): {report.chunks} chunks of "
              f"<= 200 tokens in {elapsed:.1f} s = {report.chunks / elapsed:.1f} chunks/s; "
              f"query embedding p50 {statistics.median(times):.1f} ms")
        await kb.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pgvector():
    spec = importlib.util.spec_from_file_location("pgvector_server",
                                                  ROOT / "scripts" / "pgvector_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skip-ingestion", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if not args.skip_ingestion:
        await ingestion()
    for backend in args.backends.split(","):
        print(f"{backend}:")
        for n in sizes:
            if backend == "sqlite":
                folder = tempfile.mkdtemp(prefix="flowforge-bench-kb-")
                store = knowledge_store_from_url(f"sqlite:///{folder}/k.db")
                await store.open()
                try:
                    await measure(store, n, args.queries)
                    await store.close()
                    # A new process on the same base: maps the index the first one kept.
                    store = knowledge_store_from_url(f"sqlite:///{folder}/k.db")
                    await store.open()
                    started = time.perf_counter()
                    await store.vector_search("bench", np.ones(DIMS, np.float32) / DIMS ** 0.5,
                                              10, None)
                    print(f"    first query in a new process: "
                          f"{(time.perf_counter() - started) * 1000:,.0f} ms (index kept on disk)")
                finally:
                    await store.close()
                    shutil.rmtree(folder, ignore_errors=True)
            else:
                server = _pgvector()
                url, pid, folder = server.start()
                try:
                    store = knowledge_store_from_url(url)
                    await store.open()
                    await measure(store, n, args.queries)
                    await store.close()
                finally:
                    server.stop(pid, folder)


if __name__ == "__main__":
    asyncio.run(main())
