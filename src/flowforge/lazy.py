"""A package's attributes imported from their modules on first use (PEP 562).

Some packages export names whose modules are costly to import (the knowledge
base pulls in the embedding model's runtime, the prompt-chain converters the
LLM blocks), while most programs that import the package never use them:
`from flowforge.knowledge import Knowledge` still works, and a command line
that never touches a knowledge base does not pay for it."""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: name -> the submodule (relative to
    `package`) that defines it, imported when the name is first read."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
