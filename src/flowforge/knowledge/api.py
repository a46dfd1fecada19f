"""The knowledge layer's Python API: one facade over a store and the embedders.

    from flowforge.knowledge import open_knowledge
    kb = await open_knowledge()                 # FLOWFORGE_KNOWLEDGE_URL or knowledge.db
    await kb.create("policies")
    await kb.add_paths("policies", ["examples/policies"], tags={"category": ["policies"]})
    hits = await kb.search("policies", "Can I get a refund?", top_k=3,
                           filters={"category": ["policies", "legal"]})

`open_knowledge(url)` is cached per URL (and per event loop for
PostgreSQL), so blocks and tools can call it on every run at no cost.
Adding is idempotent: each document is keyed by its source (path, URL, or
the name given to `add_text`) and a content hash; an unchanged document is
skipped, a changed one replaces its chunks in one transaction, and only the
chunks whose text changed are embedded again.  `sync_paths` makes a base
mirror declared sources instead (`knowledge.sync`): documents known by their
path inside the source, and removed when their file is gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from flowforge.errors import FlowforgeError, NotFound
from flowforge.knowledge import search as _search
from flowforge.knowledge.chunking import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS, chunk_text
from flowforge.knowledge.embeddings import Embedder, get_embedder, normalise_model_name
from flowforge.knowledge.ingest import (SourceDocument, fetch_url, load_paths, normalise_tags)
from flowforge.knowledge.store import (DocumentInfo, KnowledgeBase, KnowledgeStore, NewChunk,
                                       default_knowledge_url, knowledge_store_from_url)
from flowforge.knowledge.sync import (is_file_path, load_sources, plan_sync, synced_twin,
                                     undeclared_sources)

__all__ = ["Knowledge", "AddReport", "open_knowledge", "close_all", "knowledge_for"]

ProgressCallback = Callable[[int, int, int], None]     # (documents done, total, chunks so far)
_FLUSH_CHUNKS = 128


@dataclass
class AddReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    #: synced documents whose file is gone from the declared sources (`sync_paths`)
    removed: list[str] = field(default_factory=list)
    #: where removed documents had been synced from, when this sync does not declare
    #: it: a source taken off the list, or another workflow's syncing the same base
    undeclared: list[str] = field(default_factory=list)
    chunks: int = 0
    embedded: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _hash(doc: SourceDocument) -> str:
    payload = json.dumps([doc.name, doc.text, doc.tags], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class Knowledge:
    """Create, list, delete knowledge bases; add documents; search."""

    def __init__(self, store: KnowledgeStore,
                 embedder_for: Callable[[str], Embedder] = get_embedder) -> None:
        self.store = store
        self.embedder_for = embedder_for

    @classmethod
    async def open(cls, url: str | None = None) -> Knowledge:
        store = knowledge_store_from_url(url)
        await store.open()
        return cls(store)

    async def close(self) -> None:
        await self.store.close()

    # -- knowledge bases ------------------------------------------------------------------
    async def create(self, name: str, *, model: str | None = None, chunk_size: int | None = None,
                     chunk_overlap: int | None = None, description: str = "",
                     exist_ok: bool = False, stored_as: str | None = None) -> KnowledgeBase:
        """`stored_as`: the owner-qualified name a `UserKnowledge` view stores it under."""
        name = (name or "").strip()
        if not name or len(name) > 100 or any(c in name for c in "/\\\n"):
            raise FlowforgeError(f"invalid knowledge base name {name!r}: use 1-100 characters "
                                 f"without slashes")
        name = stored_as or name
        found = await self.store.get_base(name)
        if found is not None:
            if exist_ok:
                return found
            from flowforge.storage.base import AlreadyExists
            raise AlreadyExists(f"a knowledge base named '{name}' already exists "
                                 f"(`flowforge kb list` shows them)")
        embedder = self.embedder_for(normalise_model_name(model))
        size = chunk_size or min(DEFAULT_CHUNK_TOKENS, embedder.max_tokens - 2)
        if not 8 <= size <= embedder.max_tokens - 2:
            raise FlowforgeError(f"chunk size {size} is out of range for {embedder.model}: use "
                                 f"8 to {embedder.max_tokens - 2} tokens")
        overlap = DEFAULT_OVERLAP_TOKENS if chunk_overlap is None else chunk_overlap
        if not 0 <= overlap <= size // 2:
            raise FlowforgeError(f"chunk overlap {overlap} must be between 0 and half the "
                                 f"chunk size ({size // 2})")
        return await self.store.create_base(KnowledgeBase(
            name=name, embedding_model=embedder.model, dimensions=embedder.dimensions,
            chunk_size=size, chunk_overlap=overlap, description=description))

    async def get(self, name: str) -> KnowledgeBase:
        found = await self.store.get_base(name)
        if found is None:
            names = [b.name for b in await self.store.list_bases()]
            known = f" (existing: {', '.join(names)})" if names else ""
            raise NotFound(f"no knowledge base named '{name}'{known} - create it with "
                           f"`flowforge kb create {name}`")
        return found

    async def list(self) -> list[KnowledgeBase]:
        return await self.store.list_bases()

    async def delete(self, name: str) -> bool:
        return await self.store.delete_base(name)

    async def documents(self, name: str) -> list[DocumentInfo]:
        await self.get(name)
        return await self.store.list_documents(name)

    async def remove(self, name: str, document: str) -> int:
        """Delete documents by name, source or id; returns how many.  A caller
        that knows which documents it means (an id from a listing, a route's
        path) uses `remove_documents`: here "3" is also every document named 3."""
        await self.get(name)
        return await self.store.delete_document(name, document)

    async def remove_documents(self, name: str, ids: list[int]) -> int:
        """Delete exactly the documents with these ids; returns how many."""
        await self.get(name)
        return await self.store.delete_documents(name, ids)

    # -- adding -----------------------------------------------------------------------------
    async def add_paths(self, name: str, paths: Iterable[str | Path],
                        tags: Mapping[str, Any] | None = None,
                        progress: ProgressCallback | None = None) -> AddReport:
        docs = await asyncio.to_thread(load_paths, list(paths), normalise_tags(tags))
        return await self.add_documents(name, docs, progress)

    async def sync_paths(self, name: str, sources: Mapping[str, str | Path],
                         tags: Mapping[str, Any] | None = None,
                         progress: ProgressCallback | None = None) -> AddReport:
        """Make the synced documents of `name` mirror `sources` ({label: file or
        folder}, the label being the source as declared, `sync.source_label`):
        add or update their documents, known as `label/<path inside>`, and remove
        synced documents no longer there; other documents stay (`knowledge.sync`)."""
        await self.get(name)
        roots = {label: Path(path) for label, path in sources.items()}
        loaded = await asyncio.to_thread(load_sources, roots, normalise_tags(tags))
        plan = plan_sync(loaded, _hash, roots, await self.store.list_documents(name))
        for document_id, source in plan.adopt:
            await self.store.mark_synced(name, document_id, source)
        report = await self.add_documents(name, [doc for _, doc in loaded], progress,
                                          synced=True)
        if plan.remove:
            await self.store.delete_documents(name, [doc.id for doc in plan.remove])
            report.removed = [doc.name for doc in plan.remove]
            report.undeclared = undeclared_sources(plan.remove, roots)
        return report

    async def add_url(self, name: str, url: str, tags: Mapping[str, Any] | None = None, *,
                      allow_private_network: bool = False, transport: Any = None) -> AddReport:
        docs = await fetch_url(url, normalise_tags(tags),
                               allow_private_network=allow_private_network, transport=transport)
        return await self.add_documents(name, docs)

    async def add_text(self, name: str, text: str, *, document_name: str,
                       tags: Mapping[str, Any] | None = None,
                       source: str | None = None) -> AddReport:
        doc = SourceDocument(document_name, source or f"text:{document_name}", text,
                             normalise_tags(tags))
        return await self.add_documents(name, [doc])

    async def add_documents(self, name: str, docs: list[SourceDocument],
                            progress: ProgressCallback | None = None, *,
                            synced: bool = False) -> AddReport:
        """`synced`: the documents come from a sync (`sync_paths`). A file added by
        its absolute path that a sync already holds, unchanged, is that document
        (`sync.synced_twin`): not stored twice."""
        base = await self.get(name)
        embedder = self.embedder_for(base.embedding_model)
        report = AddReport()
        pending: list[tuple[SourceDocument, DocumentInfo | None, str, list]] = []
        pending_chunks = 0
        twins: list[DocumentInfo] = []
        if not synced and any(is_file_path(doc.source) for doc in docs):
            twins = [doc for doc in await self.store.list_documents(name) if doc.synced]
        for number, doc in enumerate(docs, 1):
            digest = _hash(doc)
            old = await self.store.find_document(name, doc.source)
            if old is not None and old.content_hash == digest or \
                    old is None and synced_twin(doc.source, digest, twins) is not None:
                report.unchanged.append(doc.name)
            else:
                chunks = await asyncio.to_thread(chunk_text, doc.text, embedder.token_spans,
                                                 base.chunk_size, base.chunk_overlap)
                if not chunks:
                    report.empty.append(doc.name)
                pending.append((doc, old, digest, chunks))
                pending_chunks += len(chunks)
            if pending_chunks >= _FLUSH_CHUNKS or number == len(docs):
                await self._flush(base, embedder, pending, report, synced)
                pending, pending_chunks = [], 0
            if progress:
                progress(number, len(docs), report.chunks)
        return report

    async def _flush(self, base: KnowledgeBase, embedder: Embedder, pending, report,
                     synced: bool) -> None:
        """Embed the pending documents' new chunks in one batch, then store each."""
        reuse: dict[str, np.ndarray] = {}
        for _doc, old, _digest, _chunks in pending:
            if old is not None:
                reuse.update(await self.store.document_vectors(old.id))
        texts = list(dict.fromkeys(c.content for *_, chunks in pending for c in chunks
                                   if c.content not in reuse))
        if texts:
            vectors = await embedder.embed(texts)
            reuse.update(zip(texts, vectors))
            report.embedded += len(texts)
            if base.dimensions is None:
                base.dimensions = int(vectors.shape[1])
                await self.store.set_dimensions(base.name, base.dimensions)
        for doc, old, digest, chunks in pending:
            matrix = (np.vstack([reuse[c.content] for c in chunks]) if chunks
                      else np.zeros((0, base.dimensions or 1), np.float32))
            if chunks and base.dimensions and matrix.shape[1] != base.dimensions:
                raise FlowforgeError(f"knowledge base '{base.name}' holds {base.dimensions}-"
                                     f"dimensional vectors but the model returned "
                                     f"{matrix.shape[1]}")
            info = DocumentInfo(id=0, kb=base.name, name=doc.name, source=doc.source,
                                tags=doc.tags, content_hash=digest, synced=synced)
            await self.store.put_document(
                info, [NewChunk(c.index, c.content, c.start, c.end) for c in chunks], matrix)
            (report.updated if old is not None else report.added).append(doc.name)
            report.chunks += len(chunks)

    # -- searching -----------------------------------------------------------------------------
    async def search(self, name: str, query: str, *, top_k: int = 5,
                     filters: Mapping[str, Any] | None = None, mode: str = "hybrid",
                     min_similarity: float | None = None,
                     model: str | None = None) -> dict[str, Any]:
        """Search one base; see `flowforge.knowledge.search` for modes and result shape."""
        base = await self.get(name)
        if model and normalise_model_name(model) != base.embedding_model:
            raise FlowforgeError(
                f"knowledge base '{name}' was built with {base.embedding_model}; querying it "
                f"with {normalise_model_name(model)} would compare unrelated vectors - leave "
                f"the model out, or re-create the base with that model")
        embedder = self.embedder_for(base.embedding_model)
        return await _search.search(self.store, embedder, base, query, top_k=top_k,
                                    filters=filters, mode=mode, min_similarity=min_similarity)

    # -- keyword index ---------------------------------------------------------------------------
    async def index_keywords(self, keywords: list[str], query: str, result_id: str, *,
                             namespace: str = "default") -> dict[str, Any]:
        from flowforge.knowledge.keywords import index_keywords
        return await index_keywords(self.store, keywords, query, result_id, namespace=namespace)

    async def lookup(self, keywords: list[str], *, namespace: str = "default") -> dict[str, Any]:
        from flowforge.knowledge.keywords import lookup
        return await lookup(self.store, keywords, namespace=namespace)


_OPEN: dict[tuple[str, int], Knowledge] = {}


async def open_knowledge(url: str | None = None) -> Knowledge:
    """The shared, opened knowledge layer for `url` (default: the configured one)."""
    url = url or default_knowledge_url()
    loop_key = 0
    if url.startswith("postgres"):
        loop_key = id(asyncio.get_running_loop())    # async connections belong to one loop
    key = (url, loop_key)
    found = _OPEN.get(key)
    if found is None:
        found = await Knowledge.open(url)
        _OPEN[key] = found
    return found


async def close_all() -> None:
    """Close every shared knowledge layer (tests, shutdown)."""
    items = list(_OPEN.values())
    _OPEN.clear()
    for item in items:
        await item.close()


async def knowledge_for(context: Any = None) -> Any:
    """The knowledge layer a running block should use: `services["knowledge"]`
    when the caller provided one (a `Knowledge`, or a store URL), else the
    shared default; seen as the run's user sees it (their own bases and the
    shared ones, `knowledge.scoped`) when the block runs for a user."""
    services = getattr(context, "services", None) or {}
    provided = services.get("knowledge") if isinstance(services, Mapping) else None
    if isinstance(provided, Knowledge):
        knowledge = provided
    elif isinstance(provided, str):
        knowledge = await open_knowledge(provided)
    else:
        knowledge = await open_knowledge()
    user = getattr(context, "user", None)
    owner = user.get("id") if isinstance(user, Mapping) else None
    if not owner:
        return knowledge
    from flowforge.knowledge.scoped import UserKnowledge

    return UserKnowledge(knowledge, str(owner).replace("/", "_"))
