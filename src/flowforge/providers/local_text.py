"""Tool results as a small local model can read them.

A tool's result reaches the model as JSON (`tools.executor.result_text`).
Measured on Qwen2.5-Coder-0.5B in the RAG chat (bench/local_model.py): the
knowledge search's JSON - passages with escaped newlines in one list, their
titles in a parallel list of metadata, a markdown table inside a string - was
misread ("19.95 EUR" for the domestic express price, the EU row's); the same
result shown as plain text, each passage under its own title and each table
row as one labelled line, was read right.  Big hosted models get the JSON
unchanged: only the local provider shows this rendering, and the run record
keeps the request exactly as the model saw it.

The rules are generic, never about one tool:
  - a JSON object whose list fields all have the same length (columns such as
    `chunks`, `scores`, `metadata`) is shown as numbered records, one per
    index, its short fields on the record's first line and its long text
    below;
  - nested objects are flattened (`title: Shipping Policy`), empty values
    dropped;
  - a top-level field that repeats an argument of the call (the search's
    `query`) is left out: the 0.5B model wrote the echoed query back as its answer;
  - a markdown table becomes one line per row, each cell named by its column
    (`- Domestic: Standard: 2-4 business days ...; Express: next business day,
    9.95 EUR`), so a row's values stay with their row.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["readable_result", "tables_as_rows"]

_SHORT = 100            # longer strings (or any with a newline) go below the record's line
_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def readable_result(text: str, arguments: dict[str, Any] | None = None) -> str:
    """`text` (a tool result) as plain text; text that is not a JSON object or
    list is returned with only its markdown tables rewritten.  `arguments` are
    the call's: top-level fields equal to one of them are not shown again."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError, ValueError):
        return tables_as_rows(text)
    if not isinstance(value, (dict, list)):
        return tables_as_rows(text)
    if isinstance(value, dict) and arguments:
        echoed = [v for v in arguments.values() if isinstance(v, (str, int, float))]
        value = {k: v for k, v in value.items()
                 if isinstance(v, (dict, list)) or v not in echoed}
    return "\n".join(_lines(value)).strip()


def _lines(value: Any) -> list[str]:
    if isinstance(value, list):
        return _records([item if isinstance(item, dict) else {"": item} for item in value])
    columns = _columns(value)
    out: list[str] = []
    head = _fields({k: v for k, v in value.items() if k not in columns})
    if head[0]:
        out.append(head[0])
    out += head[1]
    if columns:
        count = len(next(iter(columns.values())))
        out += _records([{name: column[i] for name, column in columns.items()}
                         for i in range(count)])
    return out


def _columns(value: dict[str, Any]) -> dict[str, list[Any]]:
    """The list fields of `value` shown as records: two or more of one length, or
    a single list of objects."""
    lists = {k: v for k, v in value.items() if isinstance(v, list) and v}
    if len(lists) >= 2 and len({len(v) for v in lists.values()}) == 1:
        return lists
    if len(lists) == 1 and all(isinstance(v, dict) for v in next(iter(lists.values()))):
        return lists
    return {}


def _records(items: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for number, item in enumerate(items, 1):
        line, body = _fields(item)
        out.append("")
        out.append(f"[{number}] {line}".rstrip())
        out += body
    return out


def _fields(item: dict[str, Any]) -> tuple[str, list[str]]:
    """(`key: value; ...` of the short fields, the long texts' lines)."""
    short: list[str] = []
    body: list[str] = []
    for key, value in _flat(item):
        if isinstance(value, str) and (len(value) > _SHORT or "\n" in value):
            body += tables_as_rows(value.strip()).splitlines()
        else:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            short.append(f"{key}: {shown}" if key else str(shown))
    return "; ".join(short), body


def _flat(item: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in item.items():
        if value is None or value == "" or value == [] or value == {}:
            continue
        if isinstance(value, dict):
            out += _flat(value, prefix)
        elif isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
            out.append((prefix + key, ", ".join(str(v) for v in value)))
        else:
            out.append((prefix + key, value if not isinstance(value, list)
                        else json.dumps(value, ensure_ascii=False)))
    return out


def tables_as_rows(text: str) -> str:
    """Every markdown table of `text` as one line per row, cells named by column."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if (i + 1 < len(lines) and "|" in lines[i] and _SEPARATOR.match(lines[i + 1])):
            header = _cells(lines[i])
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                cells = _cells(lines[i])
                label, rest = (cells[0] if cells else ""), cells[1:]
                named = [f"{header[j + 1] if j + 1 < len(header) else ''}: {cell}".lstrip(": ")
                         for j, cell in enumerate(rest) if cell]
                out.append(f"- {label}: " + "; ".join(named))
                i += 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _cells(line: str) -> list[str]:
    stripped = line.strip()
    if stripped.startswith("|"):
        stripped = stripped[1:]
    if stripped.endswith("|"):
        stripped = stripped[:-1]
    return [cell.strip() for cell in stripped.split("|")]
