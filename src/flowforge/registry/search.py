"""Finding blocks by what they do: full text, or hybrid through the knowledge layer.

`KnowledgeSearch` keeps a knowledge base (in the knowledge layer's store,
`FLOWFORGE_KNOWLEDGE_URL`) with one document per block whose text is the
block's description, use_when and tags - never its schemas, whose field
names would make every block with a `text` input look alike - and asks the
knowledge layer's hybrid search (embeddings + BM25, fused by reciprocal
rank).  It re-indexes a block only when that text changed.  When anything
in that path fails (no embedding model, a hosted embedder without network,
no knowledge extra), it logs why once and answers from the registry's own
FTS5 index (`TextSearch`), so block search never breaks because of
embeddings.

Blocks are keyed by (owner, id) (`registry.store`): a search is asked for
the namespaces its user sees (`owners`: theirs and the shared one) and
answers hits from those only.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from flowforge.registry.store import SHARED, BlockStore

__all__ = ["BlockSearch", "TextSearch", "KnowledgeSearch", "Hit"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    via: str               # "text" or "hybrid"
    owner: str = SHARED    # the namespace the block is in


class BlockSearch(Protocol):
    """The search interface the registry calls."""

    mode: str

    async def search(self, query: str, limit: int,
                     owners: tuple[str, ...] = (SHARED,)) -> list[Hit]: ...


class TextSearch:
    """The store's own full-text index (SQLite FTS5's bm25, PostgreSQL's ts_rank)."""

    mode = "text"

    def __init__(self, store: BlockStore) -> None:
        self.store = store

    async def search(self, query: str, limit: int,
                     owners: tuple[str, ...] = (SHARED,)) -> list[Hit]:
        return [Hit(block_id, score, "text", owner)
                for owner, block_id, score in await self.store.text_search(query, limit,
                                                                            owners)]


class KnowledgeSearch:
    """Hybrid search through the knowledge layer, text search as the fallback.

    `knowledge` is a `flowforge.knowledge.Knowledge` (default: the shared one
    for `url`, else the configured knowledge store)."""

    mode = "hybrid"

    def __init__(self, store: BlockStore, knowledge: Any = None, url: str | None = None,
                 model: str | None = None) -> None:
        self.store = store
        self.knowledge = knowledge
        self.url = url
        self.model = model
        self.text = TextSearch(store)
        self.failed: str | None = None
        self._indexed: dict[str, str] = {}
        key = store.location if store.location != ":memory:" else f"memory-{id(store)}"
        self.base = f"block-registry-{hashlib.sha1(key.encode()).hexdigest()[:10]}"

    async def _ready(self) -> Any:
        if self.knowledge is None:
            from flowforge.knowledge import open_knowledge
            self.knowledge = await open_knowledge(self.url)
        kb = self.knowledge
        if not self._indexed:
            names = {b.name for b in await kb.list()}
            if self.base not in names:
                await kb.create(self.base, model=self.model,
                                description="flowforge block registry: description, use_when "
                                            "and tags of each block")
        current = {}
        for owner, block_id in await self.store.keys():
            definition = await self.store.get(block_id, owner=owner)
            if definition is not None:
                current[_document_name(owner, block_id)] = definition
        for name, definition in current.items():
            text = definition.search_text()
            if self._indexed.get(name) != text:
                await kb.add_text(self.base, text, document_name=name,
                                  source=f"block:{name}",
                                  tags={"execution_type": definition.execution_type,
                                        "category": definition.category})
                self._indexed[name] = text
        for name in [i for i in self._indexed if i not in current]:
            await kb.remove(self.base, f"block:{name}")
            del self._indexed[name]
        return kb

    async def search(self, query: str, limit: int,
                     owners: tuple[str, ...] = (SHARED,)) -> list[Hit]:
        try:
            kb = await self._ready()
            # other users' blocks share the index: ask deep enough to find the user's
            found = await kb.search(self.base, query, top_k=min(max(limit, 1) * 3, 100),
                                    mode="hybrid")
        except Exception as exc:        # any failure on this path: answer from text alone
            if self.failed is None:
                log.warning("block search falls back to full text: %s", exc)
            self.failed = str(exc)
            return await self.text.search(query, limit, owners)
        self.failed = None
        hits, seen = [], set()
        for result in found["results"]:
            owner, block_id = _split_name(result["documentName"])
            if owner not in owners or (owner, block_id) in seen:
                continue
            if await self.store.get(block_id, owner=owner) is not None:
                seen.add((owner, block_id))
                hits.append(Hit(block_id, result["similarity"], "hybrid", owner))
        return hits[:limit]


def _document_name(owner: str, block_id: str) -> str:
    """A block's document in the search index: its id, a user's prefixed
    `owner/` (block ids never hold a '/')."""
    return f"{owner}/{block_id}" if owner else block_id


def _split_name(name: str) -> tuple[str, str]:
    owner, _, block_id = name.rpartition("/")
    return owner, block_id
