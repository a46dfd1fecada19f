"""What every reference generator shares: where the tree is, and how a field,
a type or a docstring becomes Markdown (one table cell, one type name, one
default), so that every generated page writes them the same way."""

from __future__ import annotations

import inspect
import json
import re
import textwrap
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "flowforge"
EXAMPLES = ROOT / "examples"

__all__ = ["ROOT", "SOURCE", "EXAMPLES", "cell", "annotation_name", "allowed_values",
           "default_text", "dedent_doc", "docstring_markdown", "shipped_block_types"]


def cell(text: Any) -> str:
    """A value safe inside one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def annotation_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if not typing.get_args(annotation) else None
    text = text or str(annotation)
    return re.sub(r"\b(typing|pydantic|collections\.abc|flowforge(\.\w+)*)\.", "", text)


def allowed_values(annotation: Any) -> list[Any]:
    """The values a Literal (possibly optional, possibly nested in a union) allows."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    found: list[Any] = []
    for arg in typing.get_args(annotation):
        found += allowed_values(arg)
    return found


def default_text(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "(computed)"
    elif field.default is PydanticUndefined:
        return ""
    else:
        value = field.default
    return f"`{json.dumps(value, default=str)}`"


def dedent_doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__ or "")


def docstring_markdown(text: str, language: str = "yaml") -> str:
    """A module docstring as Markdown: its indented examples become code blocks."""
    out: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            while block and not block[-1].strip():
                block.pop()
            body = textwrap.dedent("\n".join(block)).strip("\n")
            out.extend(["", f"```{language}", body, "```", ""])
            block.clear()

    for line in text.splitlines():
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


def shipped_block_types() -> dict[str, Any]:
    """The block types flowforge ships (a program, or a test in the same
    process, may register its own: those are not the manual's)."""
    from flowforge.blocks import block_types

    return {name: cls for name, cls in block_types().items()
            if cls.__module__.startswith("flowforge.blocks.")}
