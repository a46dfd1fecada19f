"""The table of block types. Adding a block type is one module and one
`@register_block`; nothing in the engine changes.

A built-in type's module is imported the first time its type is looked up,
not when the table is first read: a command whose workflow uses `set` and
`response` does not pay for importing the agent, its tools and the HTTP
client (a tenth of a second of every short command's start).  Listing the
table's names costs nothing; walking its types (`items()`, `values()`)
imports them all."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TypeVar

from flowforge.blocks.base import BlockType

__all__ = ["BUILTIN_TYPES", "ALIASES", "register_block", "block_types", "get_block_type"]

#: Built-in block types and the module of each (under flowforge.blocks),
#: imported when its type is first looked up.
BUILTIN_TYPES = {name: name for name in (
    "input", "response", "set", "function", "condition", "loop", "parallel", "workflow",
    "agent", "router", "evaluator", "guardrail", "llm", "parser", "http", "knowledge",
    "keyword_lookup", "web_search", "cited_answer", "progress", "wait", "approval", "unsupported",
    "code", "template")}
BUILTIN_TYPES["registry"] = "registry_block"

#: Other systems' names of a block type: Sim's start block (`trigger`, and
#: `starter` in its older documents) is the run's entry, the `input` block.
#: Looked up as the type they name; compiling writes the type's own name.
ALIASES = {"trigger": "input", "starter": "input"}

_TYPES: dict[str, type[BlockType]] = {}

T = TypeVar("T", bound=type[BlockType])


def register_block(cls: T) -> T:
    """Class decorator: make `cls` available as `type: <cls.type_name>`."""
    if not cls.type_name:
        raise ValueError(f"{cls.__name__} has no type_name")
    _TYPES[cls.type_name] = cls
    return cls


class _BlockTypes(Mapping[str, type[BlockType]]):
    """Every block type by name: the registered ones, and the built-ins,
    each imported on its first look-up."""

    def __getitem__(self, name: str) -> type[BlockType]:
        if name not in _TYPES and name in ALIASES:
            name = ALIASES[name]
        block_type = _TYPES.get(name)
        if block_type is None:
            module = BUILTIN_TYPES.get(name)
            if module is None:
                raise KeyError(name)
            importlib.import_module(f"flowforge.blocks.{module}")
            block_type = _TYPES[name]
        return block_type

    def __contains__(self, name: object) -> bool:
        return name in _TYPES or name in BUILTIN_TYPES or name in ALIASES

    def __iter__(self) -> Iterator[str]:
        yield from BUILTIN_TYPES
        yield from (name for name in list(_TYPES) if name not in BUILTIN_TYPES)

    def __len__(self) -> int:
        return sum(1 for _ in self)


_TABLE = _BlockTypes()


def block_types() -> Mapping[str, type[BlockType]]:
    """Every block type by name (a built-in's module is imported on its
    first look-up)."""
    return _TABLE


def get_block_type(name: str) -> type[BlockType] | None:
    return _TABLE.get(name)
