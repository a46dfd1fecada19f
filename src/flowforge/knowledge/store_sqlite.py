"""The embedded default: one SQLite file holds knowledge bases, documents,
chunks, an FTS5 index (BM25) and the vectors.

Vectors are stored as float32 blobs and searched in memory (`VectorIndex`),
loaded on the first vector search of a base: SQLite itself cannot scan
100k vectors fast enough and this Python build cannot load extensions.
Each base carries a `version` bumped by every write, so a process whose
in-memory index is older than the file (another process ran `kb add`)
reloads it before searching.

Each base has its own FTS5 table (BM25 ranking done inside FTS5 with
`ORDER BY rank`). Tag filters act inside both searches: for vectors, as the
set of allowed documents handed to the index; for text, as tag tokens in a
second FTS5 column that the MATCH expression intersects with the query terms.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

from flowforge.errors import StorageError
from flowforge.knowledge.store import (ChunkRow, DocumentInfo, Filters, KnowledgeBase,
                                       KnowledgeStore, NewChunk)
from flowforge.knowledge.text import base_token, tag_token
from flowforge.knowledge import vector_cache
from flowforge.knowledge.vectors import VectorIndex
from flowforge.storage.migrate import Migration, SQLiteSteps, apply_migrations

__all__ = ["SQLiteKnowledgeStore"]

_MIGRATIONS: list[Migration] = [
    Migration("0001_knowledge", (
        """CREATE TABLE kb_bases (name TEXT PRIMARY KEY, embedding_model TEXT NOT NULL,
            dimensions INTEGER, chunk_size INTEGER NOT NULL, chunk_overlap INTEGER NOT NULL,
            description TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL,
            version INTEGER NOT NULL DEFAULT 0)""",
        """CREATE TABLE kb_documents (id INTEGER PRIMARY KEY, kb TEXT NOT NULL
            REFERENCES kb_bases(name) ON DELETE CASCADE, name TEXT NOT NULL, source TEXT NOT NULL,
            tags TEXT NOT NULL, content_hash TEXT NOT NULL, chunk_count INTEGER NOT NULL,
            created_at REAL NOT NULL, updated_at REAL NOT NULL, UNIQUE (kb, source))""",
        """CREATE TABLE kb_doc_tags (kb TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            document_id INTEGER NOT NULL REFERENCES kb_documents(id) ON DELETE CASCADE,
            PRIMARY KEY (kb, key, value, document_id)) WITHOUT ROWID""",
        "CREATE INDEX kb_doc_tags_doc ON kb_doc_tags (document_id)",
        """CREATE TABLE kb_chunks (id INTEGER PRIMARY KEY, kb TEXT NOT NULL,
            document_id INTEGER NOT NULL REFERENCES kb_documents(id) ON DELETE CASCADE,
            chunk_index INTEGER NOT NULL, content TEXT NOT NULL, scope TEXT NOT NULL,
            start_char INTEGER NOT NULL, end_char INTEGER NOT NULL, created_at REAL NOT NULL)""",
        "CREATE INDEX kb_chunks_doc ON kb_chunks (document_id)",
        "CREATE INDEX kb_chunks_kb ON kb_chunks (kb)",
        """CREATE TABLE kb_vectors (chunk_id INTEGER PRIMARY KEY
            REFERENCES kb_chunks(id) ON DELETE CASCADE, kb TEXT NOT NULL,
            document_id INTEGER NOT NULL, embedding BLOB NOT NULL)""",
        "CREATE INDEX kb_vectors_kb ON kb_vectors (kb)",
        """CREATE TABLE kb_keywords (namespace TEXT NOT NULL, keyword TEXT NOT NULL,
            display TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL, created_at REAL NOT NULL,
            PRIMARY KEY (namespace, keyword, kind, value)) WITHOUT ROWID""",
    )),
    # A document a knowledge block's `sources:` keep in sync (`knowledge.sync`): the sync
    # removes it when its file is gone, and leaves every other document alone.
    Migration("0002_synced_documents",
              ("ALTER TABLE kb_documents ADD COLUMN synced INTEGER NOT NULL DEFAULT 0",)),
]


def _fts(kb: str) -> str:
    """Each base has its own FTS5 table (external content: the text lives once,
    in kb_chunks), so a query never intersects with a list of every chunk."""
    return f"kb_fts_{base_token(kb)}"


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _scope(tags: dict[str, list[str]]) -> str:
    return " ".join(tag_token(k, v) for k, vs in tags.items() for v in vs)


class SQLiteKnowledgeStore(KnowledgeStore):
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.db: sqlite3.Connection | None = None
        self._indexes: dict[str, tuple[int, VectorIndex]] = {}     # kb -> (version, index)
        self._allowed: dict[tuple, np.ndarray] = {}
        self._lock = threading.RLock()

    # -- lifecycle ------------------------------------------------------------------------
    async def open(self) -> None:
        if self.db is not None:
            return
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=10000")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA cache_size=-65536")
            self.db = db
            await self._migrate()
        except sqlite3.DatabaseError as exc:
            self.db = None
            raise StorageError(f"cannot open the knowledge database {self.path}: {exc} "
                               f"(set FLOWFORGE_KNOWLEDGE_URL to use another file)") from None

    async def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        self._indexes.clear()
        self._allowed.clear()

    def _conn(self) -> sqlite3.Connection:
        if self.db is None:
            raise StorageError("the knowledge store is not open: await store.open() first")
        return self.db

    async def _migrate(self) -> None:
        await apply_migrations(_MIGRATIONS, SQLiteSteps(
            self._conn(), "kb_schema", f"the knowledge database {self.path}",
            columns="name TEXT PRIMARY KEY, applied_at REAL"))

    def _write(self, fn):
        """Run `fn(db)` in one IMMEDIATE transaction."""
        db = self._conn()
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = fn(db)
                db.execute("COMMIT")
                return result
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _bump(self, db: sqlite3.Connection, kb: str) -> None:
        """Bump the base's version; keep our index current only if nobody else wrote."""
        before = db.execute("SELECT version FROM kb_bases WHERE name = ?", (kb,)).fetchone()[0]
        db.execute("UPDATE kb_bases SET version = version + 1 WHERE name = ?", (kb,))
        known = self._indexes.get(kb)
        if known is not None:
            if known[0] == before:
                self._indexes[kb] = (before + 1, known[1])
            else:
                self._indexes.pop(kb, None)
        self._allowed = {k: v for k, v in self._allowed.items() if k[0] != kb}

    @staticmethod
    def _delete_chunks(db: sqlite3.Connection, kb: str, document_id: int) -> list[int]:
        """Delete a document's chunks from FTS5 (which needs the indexed values)
        and from the table (vectors cascade); returns their ids."""
        rows = db.execute("SELECT id, content, scope FROM kb_chunks WHERE document_id = ?",
                          (document_id,)).fetchall()
        db.executemany(f'INSERT INTO "{_fts(kb)}" ("{_fts(kb)}", rowid, content, scope) '
                       f"VALUES ('delete', ?, ?, ?)", rows)
        db.execute("DELETE FROM kb_chunks WHERE document_id = ?", (document_id,))
        return [r[0] for r in rows]

    # -- knowledge bases ------------------------------------------------------------------
    @staticmethod
    def _base(row) -> KnowledgeBase:
        return KnowledgeBase(name=row[0], embedding_model=row[1], dimensions=row[2],
                             chunk_size=row[3], chunk_overlap=row[4], description=row[5],
                             created_at=row[6], documents=row[7], chunks=row[8])

    _BASE_SQL = """SELECT b.name, b.embedding_model, b.dimensions, b.chunk_size, b.chunk_overlap,
        b.description, b.created_at,
        (SELECT count(*) FROM kb_documents d WHERE d.kb = b.name),
        (SELECT coalesce(sum(chunk_count), 0) FROM kb_documents d WHERE d.kb = b.name)
        FROM kb_bases b"""

    async def create_base(self, base: KnowledgeBase) -> KnowledgeBase:
        base.created_at = base.created_at or time.time()
        def create(db):
            db.execute(
                "INSERT INTO kb_bases (name, embedding_model, dimensions, chunk_size, chunk_overlap,"
                " description, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (base.name, base.embedding_model, base.dimensions, base.chunk_size,
                 base.chunk_overlap, base.description, base.created_at))
            fts = _fts(base.name)
            db.execute(f'DROP TABLE IF EXISTS "{fts}"')
            db.execute(f'CREATE VIRTUAL TABLE "{fts}" USING fts5(content, scope, '
                       f"content='kb_chunks', content_rowid='id', tokenize='porter unicode61')")
            # `ORDER BY rank` then ranks by BM25 on the text only, inside FTS5.
            db.execute(f'INSERT INTO "{fts}" ("{fts}", rank) VALUES (\'rank\', \'bm25(1.0, 0.0)\')')
        try:
            self._write(create)
        except sqlite3.IntegrityError:
            raise StorageError(f"a knowledge base named '{base.name}' already exists") from None
        return base

    async def get_base(self, name: str) -> KnowledgeBase | None:
        row = self._conn().execute(self._BASE_SQL + " WHERE b.name = ?", (name,)).fetchone()
        return self._base(row) if row else None

    async def list_bases(self) -> list[KnowledgeBase]:
        return [self._base(r) for r in self._conn().execute(self._BASE_SQL + " ORDER BY b.name")]

    async def set_dimensions(self, name: str, dimensions: int) -> None:
        self._write(lambda db: db.execute("UPDATE kb_bases SET dimensions = ? WHERE name = ?",
                                          (dimensions, name)))

    async def delete_base(self, name: str) -> bool:
        def delete(db):
            db.execute(f'DROP TABLE IF EXISTS "{_fts(name)}"')
            db.execute("DELETE FROM kb_chunks WHERE kb = ?", (name,))
            return db.execute("DELETE FROM kb_bases WHERE name = ?", (name,)).rowcount
        deleted = self._write(delete)
        self._indexes.pop(name, None)
        if self.path != ":memory:":
            vector_cache.forget_index(self.path, name)
        return bool(deleted)

    # -- documents ------------------------------------------------------------------------
    @staticmethod
    def _doc(row) -> DocumentInfo:
        return DocumentInfo(id=row[0], kb=row[1], name=row[2], source=row[3],
                            tags=json.loads(row[4]), content_hash=row[5], chunks=row[6],
                            created_at=row[7], updated_at=row[8], synced=bool(row[9]))

    _DOC_SQL = ("SELECT id, kb, name, source, tags, content_hash, chunk_count, created_at, "
                "updated_at, synced FROM kb_documents")

    async def find_document(self, kb: str, source: str) -> DocumentInfo | None:
        row = self._conn().execute(self._DOC_SQL + " WHERE kb = ? AND source = ?",
                                   (kb, source)).fetchone()
        return self._doc(row) if row else None

    async def list_documents(self, kb: str) -> list[DocumentInfo]:
        return [self._doc(r) for r in self._conn().execute(
            self._DOC_SQL + " WHERE kb = ? ORDER BY name, id", (kb,))]

    async def document_vectors(self, document_id: int) -> dict[str, np.ndarray]:
        rows = self._conn().execute(
            "SELECT c.content, v.embedding FROM kb_chunks c JOIN kb_vectors v ON v.chunk_id = c.id"
            " WHERE c.document_id = ?", (document_id,))
        return {content: np.frombuffer(blob, dtype=np.float32) for content, blob in rows}

    async def put_document(self, doc: DocumentInfo, chunks: list[NewChunk],
                           vectors: np.ndarray) -> DocumentInfo:
        now = time.time()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        scope = _scope(doc.tags)
        fts = _fts(doc.kb)

        def put(db):
            old = db.execute("SELECT id, created_at FROM kb_documents WHERE kb = ? AND source = ?",
                             (doc.kb, doc.source)).fetchone()
            removed: list[int] = []
            if old:
                doc.id, doc.created_at = old
                removed = self._delete_chunks(db, doc.kb, doc.id)
                db.execute("DELETE FROM kb_doc_tags WHERE document_id = ?", (doc.id,))
                db.execute("UPDATE kb_documents SET name = ?, tags = ?, content_hash = ?,"
                           " chunk_count = ?, updated_at = ?, synced = ? WHERE id = ?",
                           (doc.name, json.dumps(doc.tags), doc.content_hash, len(chunks), now,
                            int(doc.synced), doc.id))
            else:
                doc.created_at = now
                doc.id = db.execute(
                    "INSERT INTO kb_documents (kb, name, source, tags, content_hash, chunk_count,"
                    " created_at, updated_at, synced) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc.kb, doc.name, doc.source, json.dumps(doc.tags), doc.content_hash,
                     len(chunks), now, now, int(doc.synced))).lastrowid
            doc.updated_at, doc.chunks = now, len(chunks)
            db.executemany("INSERT INTO kb_doc_tags VALUES (?, ?, ?, ?)",
                           [(doc.kb, k, v, doc.id) for k, vs in doc.tags.items() for v in vs])
            first = (db.execute("SELECT max(id) FROM kb_chunks").fetchone()[0] or 0) + 1
            ids = list(range(first, first + len(chunks)))
            db.executemany(
                "INSERT INTO kb_chunks (id, kb, document_id, chunk_index, content, scope,"
                " start_char, end_char, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(i, doc.kb, doc.id, c.chunk_index, c.content, scope, c.start, c.end, now)
                 for i, c in zip(ids, chunks)])
            db.executemany(f'INSERT INTO "{fts}" (rowid, content, scope) VALUES (?, ?, ?)',
                           [(i, c.content, scope) for i, c in zip(ids, chunks)])
            db.executemany("INSERT INTO kb_vectors VALUES (?, ?, ?, ?)",
                           [(i, doc.kb, doc.id, vectors[n].tobytes()) for n, i in enumerate(ids)])
            self._bump(db, doc.kb)
            return removed, ids

        removed, ids = self._write(put)
        known = self._indexes.get(doc.kb)
        if known is not None:
            known[1].remove(removed)
            known[1].add(np.array(ids, np.int64), np.full(len(ids), doc.id, np.int64), vectors)
        return doc

    async def mark_synced(self, kb: str, document_id: int, source: str) -> None:
        self._write(lambda db: db.execute(
            "UPDATE kb_documents SET source = ?, synced = 1 WHERE kb = ? AND id = ?",
            (source, kb, document_id)))

    async def delete_document(self, kb: str, name_or_source: str) -> int:
        where = "kb = ? AND (name = ? OR source = ? OR CAST(id AS TEXT) = ?)"
        return await self._delete_where(kb, where, (kb, name_or_source, name_or_source,
                                                    name_or_source))

    async def delete_documents(self, kb: str, ids: list[int]) -> int:
        count = 0
        for start in range(0, len(ids), 500):            # under SQLite's variable limit
            part = ids[start:start + 500]
            count += await self._delete_where(
                kb, f"kb = ? AND id IN ({','.join('?' * len(part))})", (kb, *part))
        return count

    async def _delete_where(self, kb: str, where: str, args: tuple) -> int:
        def delete(db):
            docs = [r[0] for r in db.execute(f"SELECT id FROM kb_documents WHERE {where}", args)]
            removed = []
            for doc_id in docs:
                removed += self._delete_chunks(db, kb, doc_id)
                db.execute("DELETE FROM kb_documents WHERE id = ?", (doc_id,))
            if docs:
                self._bump(db, kb)
            return len(docs), removed

        count, removed = self._write(delete)
        known = self._indexes.get(kb)
        if known is not None and removed:
            known[1].remove(removed)
        return count

    # -- search -----------------------------------------------------------------------------
    def _index(self, kb: str) -> VectorIndex:
        db = self._conn()
        row = db.execute("SELECT version, dimensions FROM kb_bases WHERE name = ?", (kb,)).fetchone()
        if row is None:
            raise StorageError(f"no knowledge base named '{kb}'")
        version, dims = row
        known = self._indexes.get(kb)
        if known is not None and known[0] == version:
            return known[1]
        with self._lock:
            stamp = None
            if self.path != ":memory:":
                count, top = db.execute("SELECT COUNT(*), MAX(chunk_id) FROM kb_vectors "
                                        "WHERE kb = ?", (kb,)).fetchone()
                stamp = (version, count, top)
                if count >= vector_cache.CACHE_MIN_ROWS:
                    cached = vector_cache.load_index(self.path, kb, stamp)
                    if cached is not None:
                        self._indexes[kb] = (version, cached)
                        return cached
            index = VectorIndex(dims or 1)
            ids, docs, blobs = [], [], []
            for chunk_id, doc_id, blob in db.execute(
                    "SELECT chunk_id, document_id, embedding FROM kb_vectors WHERE kb = ?", (kb,)):
                ids.append(chunk_id)
                docs.append(doc_id)
                blobs.append(blob)
            if ids:
                index.dimensions = len(blobs[0]) // 4
                matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1)
                index.tail = [(np.array(ids, np.int64), np.array(docs, np.int64), matrix)]
                index.rebuild()
                if stamp is not None and stamp[1] >= vector_cache.CACHE_MIN_ROWS:
                    vector_cache.save_index(self.path, kb, stamp, index)
            self._indexes[kb] = (version, index)
            return index

    def _allowed_docs(self, kb: str, filters: Filters) -> np.ndarray:
        key = (kb, json.dumps(filters, sort_keys=True))
        found = self._allowed.get(key)
        if found is not None:
            return found
        allowed: set[int] | None = None
        for tag, values in filters.items():
            marks = ",".join("?" * len(values))
            docs = {r[0] for r in self._conn().execute(
                f"SELECT document_id FROM kb_doc_tags WHERE kb = ? AND key = ? AND value IN ({marks})",
                (kb, tag, *values))}
            allowed = docs if allowed is None else allowed & docs
        result = np.array(sorted(allowed or ()), dtype=np.int64)
        if len(self._allowed) > 256:
            self._allowed.clear()
        self._allowed[key] = result
        return result

    async def vector_search(self, kb: str, vector: np.ndarray, k: int,
                            filters: Filters | None) -> list[tuple[int, float]]:
        index = self._index(kb)
        allowed = self._allowed_docs(kb, filters) if filters else None
        if allowed is not None and not len(allowed):
            return []
        return index.search(vector, k, allowed)

    async def text_search(self, kb: str, terms: list[str], k: int,
                          filters: Filters | None) -> list[tuple[int, float]]:
        if not terms:
            return []
        parts = ["content : (" + " OR ".join(_quote(t) for t in terms) + ")"]
        for tag, values in (filters or {}).items():
            parts.append("scope : (" + " OR ".join(_quote(tag_token(tag, v)) for v in values) + ")")
        try:
            rows = self._conn().execute(
                f'SELECT rowid, rank FROM "{_fts(kb)}" WHERE "{_fts(kb)}" MATCH ?'
                " ORDER BY rank LIMIT ?", (" AND ".join(parts), k)).fetchall()
        except sqlite3.OperationalError as exc:
            raise StorageError(f"full-text search failed: {exc}") from None
        return [(int(r[0]), -float(r[1])) for r in rows]

    async def similarities(self, kb: str, vector: np.ndarray, ids: list[int]) -> dict[int, float]:
        found = self._index(kb).vectors_for(ids)
        return {i: float(v @ vector) for i, v in found.items()}

    async def get_chunks(self, ids: list[int]) -> dict[int, ChunkRow]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._conn().execute(
            "SELECT c.id, c.document_id, d.name, c.chunk_index, c.content, c.start_char,"
            " c.end_char, d.tags, c.created_at, d.source FROM kb_chunks c"
            f" JOIN kb_documents d ON d.id = c.document_id WHERE c.id IN ({marks})", ids)
        return {r[0]: ChunkRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]), r[8],
                               r[9]) for r in rows}

    # -- keyword index ------------------------------------------------------------------------
    async def keywords_add(self, namespace: str, entries: list[tuple[str, str, str, str]]) -> None:
        now = time.time()
        self._write(lambda db: db.executemany(
            "INSERT INTO kb_keywords VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(namespace, kw, display, kind, value, now) for kw, display, kind, value in entries]))

    async def keywords_lookup(self, namespace: str,
                              keywords: list[str]) -> list[tuple[str, str, str, str]]:
        if not keywords:
            return []
        marks = ",".join("?" * len(keywords))
        return [tuple(r) for r in self._conn().execute(
            "SELECT keyword, display, kind, value FROM kb_keywords WHERE namespace = ? AND"
            f" keyword IN ({marks}) ORDER BY keyword, kind, created_at", (namespace, *keywords))]
