"""Each test gets its own registry file (text search unless a test asks for
hybrid), made the process registry so `uses:` validation sees it."""

from __future__ import annotations

import pytest

from flowforge.registry import Registry, set_registry


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")
    reg = Registry.open(f"sqlite:///{tmp_path / 'registry.db'}")
    set_registry(reg)
    yield reg
    set_registry(None)
    reg.close()
