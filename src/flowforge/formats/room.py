"""The room: which format a file is, and converting it under one policy.

Every caller (loading a document, `flowforge import`, the server's import
route, the web app) comes here, never to a converter by name.  The policy
lives here too: a conversion with unsupported nodes is refused, listing
them, unless the caller asks for a partial import.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, Mapping

from flowforge.errors import WorkflowError
from flowforge.formats.base import Format, FormatError, Imported, ImportRefused

__all__ = ["FORMATS", "formats", "detect", "parse_foreign", "read_foreign", "import_data",
           "import_file"]

#: The format modules of this package, asked in this order (the first whose
#: `detect` says yes wins, so the more specific shapes come first).  Each
#: module holds `FORMAT`, an object meeting `flowforge.formats.base.Format`.
FORMATS: list[str] = ["pipeline_json", "agent_json", "dify", "n8n", "langflow", "flowise"]


def formats() -> list[Format]:
    """Every format, in the order `detect` asks them."""
    return [importlib.import_module(f"flowforge.formats.{name}").FORMAT for name in FORMATS]


def detect(data: Any) -> Format | None:
    """The format of parsed data, or None (a native document, or unknown)."""
    for candidate in formats():
        if candidate.detect(data):
            return candidate
    return None


def parse_foreign(text: str, source: str = "<text>") -> Any:
    """JSON or YAML text -> data, within the loader's limits.  Two JSON
    documents glued together (a real n8n export does this) are named as such,
    with the place the second begins."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg == "Extra data":
                raise FormatError(
                    f"two JSON documents glued together: the second starts at line "
                    f"{exc.lineno}, column {exc.colno}; keep one document per file",
                    source=source) from None
    from flowforge.workflow.loader import parse_text

    try:
        return parse_text(text, source)
    except WorkflowError as exc:
        raise FormatError(exc.message, where=exc.where, source=source) from None


def read_foreign(path: str | Path) -> Any:
    """A file's data, every failure a FormatError naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError("no such file", source=str(path)) from None
    except IsADirectoryError:
        raise FormatError("is a folder, not a file", source=str(path)) from None
    except UnicodeDecodeError:
        raise FormatError("is not UTF-8 text", source=str(path)) from None
    return parse_foreign(text, str(path))


def import_data(data: Any, *, source: str = "<document>", partial: bool = False,
                format: str | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None) -> Imported:
    """Convert foreign data.  `format` names one (else it is detected);
    unsupported nodes refuse the import unless `partial`.  `options` holds
    settings of particular formats by name (`{"agent": {"base_url": ...}}`):
    the chosen format's `convert` gets its own as keyword arguments, and no
    other format sees them."""
    if format is not None:
        chosen = next((item for item in formats() if item.name == format), None)
        if chosen is None:
            known = ", ".join(item.name for item in formats())
            raise FormatError(f"unknown format {format!r}; known: {known}", source=source)
    else:
        chosen = detect(data)
        if chosen is None:
            known = ", ".join(item.title for item in formats())
            raise FormatError(f"not a workflow of a format flowforge imports ({known})",
                              source=source)
    own = dict((options or {}).get(chosen.name) or {})
    imported = chosen.convert(data, source=source, **own)
    if imported.report.unsupported and not partial:
        raise ImportRefused(imported, source=source)
    return imported


def import_file(path: str | Path, *, partial: bool = False, format: str | None = None,
                options: Mapping[str, Mapping[str, Any]] | None = None) -> Imported:
    return import_data(read_foreign(path), source=str(path), partial=partial, format=format,
                       options=options)
