"""Files the tests use as modules although they are not on the import path:
the project's scripts (a Redis, a PostgreSQL with pgvector, a local LLM server,
the assert-cache warmer) and the examples' helpers."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["load_module", "script"]

ROOT = Path(__file__).resolve().parents[1]


def load_module(path: Path, name: str | None = None) -> ModuleType:
    """The file at `path`, executed as a fresh module named `name` (its stem)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def script(name: str) -> ModuleType:
    """`scripts/<name>.py` as a module."""
    return load_module(ROOT / "scripts" / f"{name}.py")
