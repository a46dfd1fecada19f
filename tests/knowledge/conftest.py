"""Fixtures for the knowledge tests: every conformance test runs on SQLite
and on a throwaway PostgreSQL with pgvector (scripts/pgvector_server.py,
started once per test run on 127.0.0.1, shared by the pytest workers and
stopped at the end: tests/shared_servers.py); each PostgreSQL test gets a
schema of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowforge.knowledge.api import Knowledge, close_all
from flowforge.knowledge.store import knowledge_store_from_url

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "policies"


@pytest.fixture(scope="session")
def pgvector_url() -> str:
    from tests.shared_servers import pgvector_url
    return pgvector_url()


@pytest.fixture
def pgvector_schema_url(pgvector_url: str):
    from flowforge.storage.testing import temporary_schema

    with temporary_schema(pgvector_url, "kb_", also="public") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def knowledge_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'knowledge.db'}"
    return request.getfixturevalue("pgvector_schema_url")


@pytest.fixture
async def kb(knowledge_url: str):
    """An opened `Knowledge` on an empty store of each back end."""
    store = knowledge_store_from_url(knowledge_url)
    await store.open()
    knowledge = Knowledge(store)
    try:
        yield knowledge
    finally:
        await knowledge.close()
        await close_all()


@pytest.fixture
async def sqlite_kb(tmp_path):
    store = knowledge_store_from_url(f"sqlite:///{tmp_path / 'knowledge.db'}")
    await store.open()
    knowledge = Knowledge(store)
    try:
        yield knowledge
    finally:
        await knowledge.close()
        await close_all()
