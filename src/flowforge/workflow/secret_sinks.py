"""Secrets are sink-only: a `{{secrets.NAME}}` may be written only where a
credential goes.

Redaction recognises a secret's value only as it was loaded.  Once a value
can be transformed (`t.upper()`, `t[::-1]`, `' '.join(t)`, a dict key) it is
stored in clear in results, events and memory, and a condition on it is a
yes/no oracle.  So a secret flows only into the fields that hand it to the
other side of a connection, never into anything the run computes or
records: an LLM block's `api_key`, an `http` block's `headers`, an agent
tool's HTTP or MCP `headers` and an MCP server's `env`.  Any other use (a
`set` value, a prompt, a URL, a function argument, memory) is refused when
the document is checked, located, saying where it may go.

A block type names its credential fields in `credential_fields` (dotted
paths relative to `with`, `*` for any one key or list index:
`tools.*.mcp.env.*`); a config with an `api_key` field has that one without
saying so.  On a server, the values of the
server's environment (`{{env.NAME}}` of a variable the document does not
define, read with the `server_env` capability) follow the same rule
(`env_sink_problems`).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from flowforge.errors import Problem
from flowforge.workflow import templates

__all__ = ["sink_problems", "env_sink_problems", "credential_fields_of"]

_INDEX = re.compile(r"\[\d+\]")


def credential_fields_of(block_type: Any) -> tuple[str, ...]:
    """The fields of `block_type` (relative to `with`) a credential may go into."""
    fields = tuple(block_type.credential_fields)
    if "api_key" in block_type.Config.model_fields:
        fields += ("api_key",)
    return fields


def _parts(path: str) -> list[str]:
    return _INDEX.sub(".*", path).split(".")


def _is_sink(relative: str, fields: Iterable[str]) -> bool:
    parts = _parts(relative)
    for field in fields:
        pattern = _parts(field)
        if len(pattern) == len(parts) and all(p == "*" or p == q
                                               for p, q in zip(pattern, parts)):
            return True
    return False


def _refusals(doc: Any, block_types: Mapping[str, Any], root: str, names: Any,
              what: str) -> list[Problem]:
    problems: list[Problem] = []
    for where, spec in doc.iter_blocks():
        block_type = block_types.get(spec.type)
        if block_type is None:
            continue                          # reported as an unknown type
        raw = block_type.raw_fields
        prefix = f"{where}.with."
        fields = credential_fields_of(block_type)
        try:
            refs = list(templates.references_in(
                {k: v for k, v in spec.with_.items() if k not in raw}, f"{where}.with"))
        except Exception:  # noqa: BLE001 - a bad expression is reported by compiling
            continue
        for ref in refs:
            if ref.root != root or len(ref.path) != 2 or not names(ref.path[1]):
                continue                      # whole-namespace reads are refused elsewhere
            if ref.where.endswith(".expr"):
                continue                      # expressions cannot read it at all (compile)
            relative = ref.where[len(prefix):] if ref.where.startswith(prefix) else ""
            if relative and _is_sink(relative, fields):
                continue
            sinks = ", ".join(f"`{field}`" for field in fields)
            problems.append(Problem(ref.where, (
                f"{ref.text}: {what} may only go where a credential goes "
                f"({sinks} of a `{spec.type}` block)" if fields else
                f"{ref.text}: {what} may only go where a credential goes, and a "
                f"`{spec.type}` block has no such field") +
                "; a value written anywhere else could be transformed and stored in clear "
                "(an LLM block's `api_key`, an `http` block's `headers`, an agent tool's "
                "`headers` or an MCP server's `env` take it)"))
    return problems


def sink_problems(doc: Any, block_types: Mapping[str, Any]) -> list[Problem]:
    """Every `{{secrets.NAME}}` outside a credential field, located."""
    return _refusals(doc, block_types, "secrets", lambda name: True, "a secret")


def env_sink_problems(compiled: Any) -> list[Problem]:
    """Every `{{env.NAME}}` of the server's environment (a name the document
    does not define under `env:`) outside a credential field of a compiled
    workflow, located."""
    own = set(compiled.doc.env)
    return _refusals(compiled.doc, _types_in(compiled.graph, {}), "env",
                     lambda name: name not in own, "a value of the server's environment")


def _types_in(graph: Any, found: dict[str, Any]) -> dict[str, Any]:
    for node in graph.nodes.values():
        found.setdefault(node.type, node.info)
        if node.children is not None:
            _types_in(node.children, found)
    return found
