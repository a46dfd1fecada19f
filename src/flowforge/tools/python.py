"""A registered Python function as a tool; its schema comes from its signature.

Type hints become JSON-Schema types (through pydantic, so `list[str]`,
`Literal[...]`, `Optional`, pydantic models all work), parameters without a
default are required, and a Google-style `Args:` section in the docstring
gives each parameter its description.  A parameter named `context` (or
annotated `ToolContext`) is not offered to the model: it receives the run
context.  Plain functions run in a worker thread so parallel calls overlap
and a slow function never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from typing import Any

from pydantic import ConfigDict, Field, TypeAdapter, create_model

from flowforge.tools.functions import RegisteredFunction, get_function
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["function_tool", "schema_from_signature"]

_ARGS_RE = re.compile(r"^\s*(?:Args|Arguments|Parameters):\s*$", re.MULTILINE)
_PARAM_RE = re.compile(r"^\s{2,}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _param_docs(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google-style docstring."""
    match = _ARGS_RE.search(doc)
    if not match:
        return doc.strip(), {}
    summary = doc[:match.start()].strip()
    described: dict[str, str] = {}
    for line in doc[match.end():].splitlines():
        if line.strip() and not line.startswith((" ", "\t")):
            break                                   # the next section
        found = _PARAM_RE.match(line)
        if found:
            described[found.group(1).lstrip("*")] = found.group(2).strip()
    return summary, described


def _is_context(name: str, annotation: Any) -> bool:
    return name == "context" or annotation is ToolContext or annotation == "ToolContext"


def schema_from_signature(fn: Any) -> tuple[dict[str, Any], str | None, str]:
    """(JSON Schema of the parameters, name of the context parameter or None, summary)."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable hints fall back to "any"
        hints = {}
    summary, described = _param_docs(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    context_name = None
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(name, param.annotation)
        if _is_context(name, annotation):
            context_name = name
            continue
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, Field(default, description=described.get(name)))
    model = create_model(f"{getattr(fn, '__name__', 'tool')}_args",
                         __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema, context_name, summary


def function_tool(function: str | RegisteredFunction, *, name: str | None = None,
                  description: str | None = None, runs_commands: bool = False) -> Tool:
    """The tool for a function registered with `@flowforge.function`."""
    registered = get_function(function) if isinstance(function, str) else function
    schema, context_name, summary = schema_from_signature(registered.fn)
    adapters = {key: TypeAdapter(hint) for key, hint in _hints(registered.fn).items()}
    fn = registered.fn

    async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
        kwargs = {key: adapters[key].validate_python(value) if key in adapters else value
                  for key, value in arguments.items()}
        if context_name:
            kwargs[context_name] = context
        if registered.is_async:
            return await fn(**kwargs)
        return await asyncio.to_thread(fn, **kwargs)

    return Tool(name=name or registered.name,
                description=description or summary or registered.description or registered.name,
                parameters=schema, execute=execute, kind="function", runs_commands=runs_commands)


def _hints(fn: Any) -> dict[str, Any]:
    """Hints that need conversion from JSON (models, dates, enums); plain types pass as is."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001
        return {}
    hints.pop("return", None)
    simple = (str, int, float, bool, dict, list, Any)
    return {key: hint for key, hint in hints.items()
            if hint not in simple and not _is_context(key, hint)}
