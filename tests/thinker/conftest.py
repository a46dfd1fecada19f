from __future__ import annotations

from pathlib import Path

import pytest

from flowforge.registry import Registry, set_registry

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "build"


def rules(name: str) -> str:
    """The model string of a scripted rules file in examples/build."""
    return f"scripted/{EXAMPLES / f'{name}.rules.yaml'}"


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")
    reg = Registry.open(f"sqlite:///{tmp_path / 'registry.db'}")
    set_registry(reg)
    yield reg
    set_registry(None)
    reg.close()
