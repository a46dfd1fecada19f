"""The table of block types. Adding a block type is one module and one
`@register_block`; nothing in the engine changes."""

from __future__ import annotations

from typing import TypeVar

from flowforge.blocks.base import BlockType

__all__ = ["register_block", "block_types", "get_block_type"]

_TYPES: dict[str, type[BlockType]] = {}

T = TypeVar("T", bound=type[BlockType])


def register_block(cls: T) -> T:
    """Class decorator: make `cls` available as `type: <cls.type_name>`."""
    if not cls.type_name:
        raise ValueError(f"{cls.__name__} has no type_name")
    _TYPES[cls.type_name] = cls
    return cls


def block_types() -> dict[str, type[BlockType]]:
    """Every registered block type, built-ins loaded."""
    _load_builtins()
    return _TYPES


def get_block_type(name: str) -> type[BlockType] | None:
    return block_types().get(name)


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib

    from flowforge.blocks import BUILTIN_MODULES

    for module in BUILTIN_MODULES:
        importlib.import_module(f"flowforge.blocks.{module}")
