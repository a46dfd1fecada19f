"""Each test gets its own registry (text search unless a test asks for
hybrid), made the process registry so `uses:` validation sees it: a SQLite
file, and for the store's own tests also an empty PostgreSQL schema."""

from __future__ import annotations

import pytest

from flowforge.registry import Registry, set_registry
from tests.storage.conftest import postgres_schema_url, postgres_url  # noqa: F401


@pytest.fixture
def registry_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture
def registry(registry_url, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")
    reg = Registry.open(registry_url)
    set_registry(reg)
    yield reg
    set_registry(None)
    reg.close()
