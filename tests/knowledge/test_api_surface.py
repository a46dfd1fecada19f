"""Each knowledge module's public names are its `__all__`, and they exist."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import flowforge.knowledge

MODULES = [m.name for m in pkgutil.iter_modules(flowforge.knowledge.__path__)]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name):
    module = importlib.import_module(f"flowforge.knowledge.{name}")
    assert module.__doc__, f"{name} has no docstring"
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


def test_package_names_resolve_lazily():
    for name in flowforge.knowledge.__all__:
        assert getattr(flowforge.knowledge, name) is not None
    with pytest.raises(AttributeError):
        flowforge.knowledge.nothing_here  # noqa: B018
