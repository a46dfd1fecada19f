"""Why a block's `with:` does not fit its config, in the author's words.

Pydantic reports a config's errors in its own terms: union branch tags
(`function-after[...]`), every branch's complaint, a templated value's type
that only the run will know.  Compiling wants the problems a person can act
on, located in the document (`blocks[2].with.tools[0].headers`), with the
closest field suggested.  This module turns one into the other, apart from
the compiler so that each reads on its own.
"""

from __future__ import annotations

from typing import Any

from flowforge.errors import Problem
from flowforge.hints import did_you_mean
from flowforge.workflow import templates

__all__ = ["config_problems", "placeholders", "format_loc"]


def format_loc(loc: tuple[Any, ...], prefix: str = "") -> str:
    """Pydantic's ("blocks", 3, "with") -> "blocks[3].with"."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            part = "with" if part == "with_" else part
            out += f".{part}" if out else str(part)
    return out


_PLACEHOLDER = object()


def placeholders(value: Any) -> Any:
    """`with` with every templated value swapped for a marker, so the config
    model checks the structure (unknown and missing fields, static types)."""
    if isinstance(value, str):
        return _PLACEHOLDER if templates.has_templates(value) else value
    if isinstance(value, dict):
        if templates.has_templates(value) and len(value) == 1 and "expr" in value:
            return _PLACEHOLDER
        return {k: placeholders(v) for k, v in value.items()}
    if isinstance(value, list):
        return [placeholders(v) for v in value]
    return value


def _is_placeholder_error(with_: dict, loc: tuple, error: dict) -> bool:
    if error.get("input") is _PLACEHOLDER:
        return True
    value: Any = placeholders(with_)
    for part in loc:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        elif isinstance(part, str) and isinstance(value, (dict, list)):
            continue                       # a union branch's tag (`str`, `function-after[...]`)
        else:
            break
        if value is _PLACEHOLDER:
            return True
    return False


_SCALAR_TAGS = ("str", "int", "float", "bool", "none")


def _scalar_branch_of_mapping(with_: dict, loc: tuple, prefix: tuple) -> bool:
    value: Any = with_
    for part in prefix:
        value = value[part]
    tag = loc[len(prefix)] if len(loc) > len(prefix) else None
    return isinstance(value, dict) and isinstance(tag, str) and tag in _SCALAR_TAGS


def _untagged(loc: tuple, prefix: tuple | None) -> tuple:
    """`loc` without the union branch tag after `prefix` (`function-after[...]`)."""
    if prefix is None or len(loc) <= len(prefix):
        return loc
    return tuple(loc[:len(prefix)]) + tuple(loc[len(prefix) + 1:])


def _union_prefix(with_: dict, loc: tuple) -> tuple | None:
    """The location of the union a pydantic error is inside (the parts before the
    first branch tag), or None when the error is not inside a union."""
    value: Any = with_
    for index, part in enumerate(loc):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        elif isinstance(part, str) and (index < len(loc) - 1 or part in _SCALAR_TAGS
                                        or "[" in part):
            return tuple(loc[:index])        # not a key here, and not a missing field's name
        else:
            return None
    return None


def _fields_at(model: Any, path: tuple) -> list[str] | None:
    """The field names of the pydantic model at `path` inside `model` (through
    list indexes and union tags), or None when it cannot be told."""
    from pydantic import BaseModel

    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        if isinstance(current, type) and issubclass(current, BaseModel) and \
                part in current.model_fields:
            current = current.model_fields[part].annotation
        elif isinstance(part, str) and ("[" in part or part.isidentifier()):
            # a union branch tag: the model it names, among the annotation's members
            candidates = [c for c in _members(current) if isinstance(c, type)
                          and issubclass(c, BaseModel) and c.__name__ in part]
            if len(candidates) != 1:
                return None
            current = candidates[0]
        else:
            return None
        members = [c for c in _members(current) if isinstance(c, type)
                   and issubclass(c, BaseModel)]
        if len(members) == 1 and not (isinstance(current, type) and
                                      issubclass(current, BaseModel)):
            current = members[0]
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    members = [c for c in _members(current) if isinstance(c, type) and issubclass(c, BaseModel)]
    return list(members[0].model_fields) if len(members) == 1 else None


def _members(annotation: Any) -> list[Any]:
    """Every type inside an annotation (`list[str | ToolEntry] | None` -> str, ToolEntry)."""
    import typing

    args = typing.get_args(annotation)
    if not args:
        return [annotation]
    out: list[Any] = []
    for arg in args:
        out.extend(_members(arg))
    return out


def _explain(error: dict, model: Any, loc: tuple) -> str:
    kind = error.get("type")
    if kind == "extra_forbidden":
        field = loc[-1] if loc else "?"
        known = _fields_at(model, loc[:-1])
        if known is None:
            return f"unknown field '{field}'"
        return f"unknown field '{field}'{did_you_mean(str(field), known)}; " \
               f"allowed: {', '.join(known)}"
    if kind == "missing":
        return "required field is missing"
    return error.get("msg", "invalid value")



def config_problems(errors: list[dict], with_: dict, config_model: Any,
                    where: str) -> list[Problem]:
    """The problems of pydantic's `errors` for `with_` validated (placeholders
    in place of templates) against `config_model`, located under `where`."""
    # A union (`str | ToolEntry`) whose one branch failed only on templated
    # values is fine: the other branches' complaints are not problems.
    templated_unions = {_union_prefix(with_, e["loc"]) for e in errors
                        if e.get("type") != "extra_forbidden"
                        and _is_placeholder_error(with_, e["loc"], e)}
    problems: list[Problem] = []
    for error in errors:
        loc = error["loc"]
        if error.get("type") != "extra_forbidden" and _is_placeholder_error(with_, loc, error):
            continue               # a templated value's type is known at run time
        prefix = _union_prefix(with_, loc)
        if prefix is not None and prefix in templated_unions and \
                error.get("type") != "extra_forbidden":
            continue
        if prefix is not None and _scalar_branch_of_mapping(with_, loc, prefix):
            continue               # a mapping was written: "not a string" is noise
        problems.append(Problem(format_loc(_untagged(loc, prefix), where),
                                _explain(error, config_model, loc)))
    return problems
