"""Knowledge bases: ingestion, offline embeddings, hybrid search with tag
filters, the keyword index - SQLite by default, PostgreSQL + pgvector at scale.

Where things live: `api` (the facade: create/list/delete/add/search),
`ingest` (files, folders, URLs), `chunking`, `embeddings` (+ `minilm_onnx`),
`store` (the interface) with `store_sqlite` / `store_postgres`, `vectors`
(the in-memory index beside SQLite), `search` (modes and result shape),
`tool` (the agents' `knowledge_search`), `keywords` (RAG chat keyword index),
`semantic` (semantic routing).

Names are imported lazily so `import flowforge.knowledge.tool` stays cheap.
"""

from __future__ import annotations

from flowforge.lazy import lazy_attributes

__all__ = ["Knowledge", "AddReport", "open_knowledge", "knowledge_for", "close_all",
           "get_embedder", "rank_routes", "knowledge_store_from_url", "default_knowledge_url"]

_WHERE = {"Knowledge": "api", "AddReport": "api", "open_knowledge": "api",
          "knowledge_for": "api", "close_all": "api", "get_embedder": "embeddings",
          "rank_routes": "semantic", "knowledge_store_from_url": "store",
          "default_knowledge_url": "store"}

__getattr__ = lazy_attributes(__name__, _WHERE)
