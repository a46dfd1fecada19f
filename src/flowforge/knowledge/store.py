"""The knowledge store interface: one abstract class, one module per back end.

`SQLiteKnowledgeStore` (the embedded default: one file holds documents,
chunks, FTS5 and vectors, with an in-memory index beside it) and
`PostgresKnowledgeStore` (pgvector HNSW + PostgreSQL full-text search) both
implement `KnowledgeStore` and pass the same conformance tests.  The store
only stores and searches: chunking, embedding and result shaping happen
above it (`api`, `search`), once for both back ends.

`knowledge_store_from_url(url)` picks the back end; with no URL it uses
`FLOWFORGE_KNOWLEDGE_URL`, else `knowledge.db` beside the main database.
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flowforge.errors import BadDatabaseURL, StorageError

__all__ = ["KnowledgeBase", "DocumentInfo", "NewChunk", "ChunkRow", "Filters", "KnowledgeStore",
           "default_knowledge_url", "knowledge_store_from_url"]

#: `{tag: [values]}`: a chunk matches when, for every tag, it has one of the values.
Filters = dict[str, list[str]]


@dataclass
class KnowledgeBase:
    name: str
    embedding_model: str
    dimensions: int | None
    chunk_size: int
    chunk_overlap: int
    description: str = ""
    created_at: float = 0.0
    documents: int = 0
    chunks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DocumentInfo:
    id: int
    kb: str
    name: str
    source: str
    tags: dict[str, list[str]]
    content_hash: str
    chunks: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0
    #: kept in sync with declared sources (`knowledge.sync`): removed when its file is gone
    synced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class NewChunk:
    chunk_index: int
    content: str
    start: int
    end: int


@dataclass
class ChunkRow:
    id: int
    document_id: int
    document_name: str
    chunk_index: int
    content: str
    start: int
    end: int
    tags: dict[str, list[str]] = field(default_factory=dict)
    created_at: float = 0.0
    source: str = ""


class KnowledgeStore(abc.ABC):
    """Durable knowledge bases. Every method is async; ids are integers."""

    url: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    # -- knowledge bases -------------------------------------------------------------
    @abc.abstractmethod
    async def create_base(self, base: KnowledgeBase) -> KnowledgeBase:
        """Create it; StorageError if the name is taken."""

    @abc.abstractmethod
    async def get_base(self, name: str) -> KnowledgeBase | None: ...

    @abc.abstractmethod
    async def list_bases(self) -> list[KnowledgeBase]: ...

    @abc.abstractmethod
    async def set_dimensions(self, name: str, dimensions: int) -> None:
        """Record the vector size once known (the first document of a base whose
        model reports its size on first use)."""

    @abc.abstractmethod
    async def delete_base(self, name: str) -> bool:
        """Delete the base with its documents, chunks, vectors; False if absent."""

    # -- documents --------------------------------------------------------------------
    @abc.abstractmethod
    async def find_document(self, kb: str, source: str) -> DocumentInfo | None: ...

    @abc.abstractmethod
    async def list_documents(self, kb: str) -> list[DocumentInfo]: ...

    @abc.abstractmethod
    async def document_vectors(self, document_id: int) -> dict[str, np.ndarray]:
        """Chunk content -> vector of a stored document (re-adding an edited
        document re-embeds only the chunks that changed)."""

    @abc.abstractmethod
    async def put_document(self, doc: DocumentInfo, chunks: list[NewChunk],
                           vectors: np.ndarray) -> DocumentInfo:
        """Insert the document, or replace the one with the same (kb, source),
        chunks and vectors included, in one transaction."""

    @abc.abstractmethod
    async def delete_document(self, kb: str, name_or_source: str) -> int:
        """Delete the documents whose name, source or id matches; returns how many."""

    @abc.abstractmethod
    async def delete_documents(self, kb: str, ids: list[int]) -> int:
        """Delete exactly these documents of `kb` (by id); returns how many."""

    @abc.abstractmethod
    async def mark_synced(self, kb: str, document_id: int, source: str) -> None:
        """Give a stored document the source a sync knows it by, and mark it synced
        (a document stored before syncs had identities of their own), keeping its
        chunks and vectors."""

    # -- search -------------------------------------------------------------------------
    @abc.abstractmethod
    async def vector_search(self, kb: str, vector: np.ndarray, k: int,
                            filters: Filters | None) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity), best first, filters applied inside."""

    @abc.abstractmethod
    async def text_search(self, kb: str, terms: list[str], k: int,
                          filters: Filters | None) -> list[tuple[int, float]]:
        """(chunk id, relevance > 0, higher is better) by BM25-style ranking of chunks
        containing any of `terms`, filters applied inside."""

    @abc.abstractmethod
    async def similarities(self, kb: str, vector: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Cosine similarity of `vector` to each listed chunk."""

    @abc.abstractmethod
    async def get_chunks(self, ids: list[int]) -> dict[int, ChunkRow]: ...

    # -- keyword index (RAG chat) --------------------------------------------------------
    @abc.abstractmethod
    async def keywords_add(self, namespace: str, entries: list[tuple[str, str, str, str]]) -> None:
        """Rows of (normalised keyword, display form, kind: query|result, value);
        duplicates are merged."""

    @abc.abstractmethod
    async def keywords_lookup(self, namespace: str,
                              keywords: list[str]) -> list[tuple[str, str, str, str]]:
        """Rows of (normalised keyword, display form, kind, value) for the keywords."""


def default_knowledge_url() -> str:
    """`FLOWFORGE_KNOWLEDGE_URL`, else `knowledge.db` in the main database's
    folder (a PostgreSQL main database keeps knowledge in the same database)."""
    url = os.environ.get("FLOWFORGE_KNOWLEDGE_URL")
    if url:
        return url
    from flowforge.storage import default_database_url
    main = default_database_url()
    if main.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return main
    path = main[len("sqlite:///"):] if main.startswith("sqlite:///") else main
    if main.startswith("sqlite:") and not main.startswith("sqlite:///") or path in ("", ":memory:"):
        return "sqlite://:memory:"
    return f"sqlite:///{Path(path).parent / 'knowledge.db'}"


def knowledge_store_from_url(url: str | None = None) -> KnowledgeStore:
    """A (not yet opened) store: `sqlite:///file.db`, `sqlite://:memory:`, a bare
    path, or `postgresql://user@host/db`."""
    url = url or default_knowledge_url()
    if url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        try:
            from flowforge.knowledge.store_postgres import PostgresKnowledgeStore
        except ImportError as exc:
            raise StorageError(f"PostgreSQL knowledge bases need psycopg: pip install "
                               f"'flowforge[postgres]' ({exc})") from None
        return PostgresKnowledgeStore(url.replace("postgresql+psycopg://", "postgresql://"))
    from flowforge.knowledge.store_sqlite import SQLiteKnowledgeStore
    if url.startswith("sqlite:"):
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ":memory:"
        return SQLiteKnowledgeStore(path or ":memory:")
    if "://" in url:
        raise BadDatabaseURL(f"unsupported knowledge URL '{url}': use sqlite:///path.db or "
                           f"postgresql://user@host/db (FLOWFORGE_KNOWLEDGE_URL)")
    return SQLiteKnowledgeStore(url)
