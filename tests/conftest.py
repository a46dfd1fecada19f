"""Test-wide set-up: every test gets its own database file, and nothing a
test does can reach a model API or another machine."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_database(tmp_path, monkeypatch):
    """Runs recorded by a test go to a throwaway SQLite file, never the user's."""
    monkeypatch.setenv("FLOWFORGE_DATABASE_URL", f"sqlite:///{tmp_path / 'flowforge.db'}")
    yield
