"""Reading workflow documents from YAML or JSON, with located errors.

Malformed text is reported with its line and column; a document that parses
but does not fit the format is reported as the list of located problems from
the Pydantic model, never as a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from flowforge.errors import Problem, ValidationFailed, WorkflowError
from flowforge.hints import did_you_mean
from flowforge.workflow.config_errors import format_loc
from flowforge.workflow.model import (BlockSpec, Budget, Downgrade, Join, RetryPolicy,
                                      Trigger, Workflow)

__all__ = ["parse_text", "read_data", "read_document", "document_from_data", "check_data",
           "LIMITS", "json_depth_error"]


class LIMITS:
    """What a document may be: it reaches a shared server from any user, so
    its size, nesting, aliases and numbers are bounded before anything walks
    it (a few hundred bytes of YAML aliases otherwise expand to billions of
    nodes; 5,000 nested brackets overflow the parser's stack)."""

    bytes = 2 * 1024 * 1024      # a document's text
    depth = 100                  # nested mappings and lists
    nodes = 200_000              # YAML nodes once aliases are expanded
    int_digits = 20              # an integer's digits (|n| < 10**20)


def _limit(message: str, source: str, line: int | None = None,
           column: int | None = None) -> WorkflowError:
    at = f" at line {line}" if line is not None else ""
    at += f", column {column}" if column is not None else ""
    return WorkflowError(f"{message}{at}", source=source)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the limits above, checked while composing:
    depth before recursing, expanded size as aliases are met, integer length
    before converting."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source
        self.depth = 0
        self.expanded = 0
        self.sizes: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            self._count(self.sizes.get(id(node), 1), event)
            return node
        self.depth += 1
        if self.depth > LIMITS.depth:
            mark = event.start_mark
            raise _limit(f"the document is nested deeper than {LIMITS.depth} levels",
                         self.source, mark.line + 1, mark.column + 1)
        before = self.expanded
        node = super().compose_node(parent, index)
        self.depth -= 1
        if not isinstance(node, yaml.ScalarNode):
            self._count(1, event)
        else:
            self._count(1, event)
        self.sizes[id(node)] = self.expanded - before
        return node

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        """A `[` or `{` the scanner reads as a flow collection (never one inside
        a block scalar, a plain or quoted text, or a comment) counts against
        the depth limit before the scanner goes on: past it, PyYAML's scanner
        slows quadratically (it re-checks a possible key per open level)."""
        if self.flow_level >= LIMITS.depth:
            mark = self.get_mark()
            raise _limit(f"the document is nested deeper than {LIMITS.depth} levels",
                         self.source, mark.line + 1, mark.column + 1)
        super().fetch_flow_collection_start(TokenClass)

    def _count(self, size: int, event: Any) -> None:
        self.expanded += size
        if self.expanded > LIMITS.nodes:
            mark = event.start_mark
            raise _limit(f"the document expands to more than {LIMITS.nodes:,} values (YAML "
                         f"aliases repeat what they name: use fewer)", self.source,
                         mark.line + 1, mark.column + 1)

    def construct_yaml_int(self, node: Any) -> Any:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > LIMITS.int_digits:
            raise _limit(f"the integer is longer than {LIMITS.int_digits} digits", self.source,
                         node.start_mark.line + 1, node.start_mark.column + 1)
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)

_JSON_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')
_JSON_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth_error(text: str, source: str) -> WorkflowError | None:
    """The first place JSON nests brackets deeper than the limit, strings
    skipped, found in one linear pass (`json.loads` would recurse to find out).
    For JSON only: in YAML a bracket may be text (a block scalar, a plain
    scalar, `{{#node.field#}}` in a prompt), so YAML's depth is counted by
    `_BoundedLoader`'s scanner, which knows which brackets are structure."""
    depth = 0
    stripped = _JSON_STRINGS.sub('""', text)
    for match in _JSON_BRACKETS.finditer(stripped):
        depth += 1 if match.group() in "[{" else -1
        if depth > LIMITS.depth:
            line = stripped.count("\n", 0, match.start()) + 1
            return _limit(f"the document is nested deeper than {LIMITS.depth} levels",
                          source, line)
    return None


def _bounded_int(text: str) -> int:
    if sum(ch.isdigit() for ch in text) > LIMITS.int_digits:
        raise ValueError(f"an integer is longer than {LIMITS.int_digits} digits")
    return int(text)


def parse_text(text: str, source: str = "<text>") -> Any:
    """YAML or JSON text -> plain data (JSON is YAML, but its errors read better),
    within LIMITS; every failure is a WorkflowError naming the place and the limit."""
    if len(text) > LIMITS.bytes or len(text.encode("utf-8", "surrogatepass")) > LIMITS.bytes:
        raise _limit(f"the document is larger than {LIMITS.bytes // (1024 * 1024)} MiB", source)
    as_json = source.endswith(".json") or text.lstrip().startswith(("{", "["))
    if as_json:
        deep = json_depth_error(text, source)
        if deep is not None and source.endswith(".json"):
            raise deep
        as_json = deep is None     # else it may be YAML whose brackets are text: the scanner says
    if as_json:
        try:
            return check_data(json.loads(text, parse_int=_bounded_int), source)
        except json.JSONDecodeError as exc:
            if source.endswith(".json"):
                raise WorkflowError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: "
                                    f"{exc.msg}", source=source) from None
        except (ValueError, RecursionError) as exc:
            raise WorkflowError(f"invalid JSON: {exc}", source=source) from None
    try:
        loader = _BoundedLoader(text, source)
    except yaml.YAMLError as exc:            # the reader refuses control characters at once
        raise WorkflowError(f"invalid YAML: {exc}", source=source) from None
    try:
        return check_data(loader.get_single_data(), source)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = exc.problem or exc.context or "malformed YAML"
        raise WorkflowError(f"invalid YAML{at}: {reason}", source=source) from None
    except yaml.YAMLError as exc:
        raise WorkflowError(f"invalid YAML: {exc}", source=source) from None
    except (ValueError, RecursionError, OverflowError) as exc:
        raise WorkflowError(f"invalid YAML: {exc}", source=source) from None
    finally:
        loader.dispose()


def check_data(data: Any, source: str = "<data>") -> Any:
    """Plain data within LIMITS (depth, size, integers) and holding only text
    that can be encoded (no lone surrogate such as "\\ud800"); returns it.
    Walks iteratively: the data may come from anywhere, deep or not."""
    stack: list[tuple[Any, str, int]] = [(data, "", 1)]
    seen = 0
    while stack:
        value, where, depth = stack.pop()
        seen += 1
        if seen > LIMITS.nodes:
            raise WorkflowError(f"the document holds more than {LIMITS.nodes:,} values",
                                source=source)
        if depth > LIMITS.depth:
            raise WorkflowError(f"nested deeper than {LIMITS.depth} levels", where=where,
                                source=source)
        if isinstance(value, str):
            _check_text(value, where, source)
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            continue
        elif isinstance(value, int):
            if abs(value) >= 10 ** LIMITS.int_digits:
                raise WorkflowError(f"the integer is longer than {LIMITS.int_digits} digits",
                                    where=where, source=source)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    _check_text(key, where, source)
                label = f"{where}.{key}" if where else str(key)
                stack.append((item, label, depth + 1))
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                stack.append((item, f"{where}[{index}]", depth + 1))
    return data


def _check_text(text: str, where: str, source: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkflowError(f"the text holds a lone surrogate ({text[exc.start]!r} at "
                            f"character {exc.start}), which is not valid Unicode: remove it",
                            where=where or "(document)", source=source) from None


def document_from_data(data: Any, source: str = "<data>") -> Workflow:
    """Plain data -> Workflow, or ValidationFailed listing each located problem."""
    if not isinstance(data, dict):
        raise WorkflowError("a workflow document must be a mapping with `id` and `blocks`",
                            source=source)
    check_data(data, source)
    try:
        return Workflow.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            # Pydantic reports each branch of `retry: RetryPolicy | int`; keep the readable one.
            loc = tuple(part for part in loc
                        if part not in ("RetryPolicy", "int", "constrained-int"))
            if error["type"] in ("model_type", "int_type") and "retry" in loc:
                continue                     # the other branch of `RetryPolicy | int` says why
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = f"unknown field '{loc[-1]}'{did_you_mean(str(loc[-1]), _keys_at(loc))}"
            elif error["type"] == "missing":
                message = "required field is missing"
            elif error["type"] == "string_too_long" and isinstance(error.get("input"), str):
                message = (f"too long: {len(error['input'])} characters, at most "
                           f"{(error.get('ctx') or {}).get('max_length')}")
            problems.append(Problem(format_loc(loc), message))
        unique = list(dict.fromkeys(problems))
        raise ValidationFailed(unique, source=source) from None


def _keys_at(loc: tuple) -> list[str]:
    """The keys the model allows where an unknown one was written (`loc`
    ends with it): the document's, a block's, a trigger's, a budget's, ..."""
    models = {"budget": Budget, "retry": RetryPolicy, "after": Join, "on_exceed": Downgrade}
    parent = loc[-2] if len(loc) >= 2 else None
    if parent is None:
        model: Any = Workflow
    elif isinstance(parent, int) and len(loc) >= 3 and loc[-3] == "triggers":
        model = Trigger
    elif isinstance(parent, int):
        model = BlockSpec
    else:
        model = models.get(parent)
    if model is None:
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def read_data(path: str | Path) -> Any:
    """A workflow file's data (`.yaml`, `.yml` or `.json`), within the limits:
    what `read_document` validates, and what loading shows the formats room
    when it is not a flowforge document."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkflowError(f"no such workflow file: {path}") from None
    except IsADirectoryError:
        raise WorkflowError(f"{path} is a directory, not a workflow file") from None
    except UnicodeDecodeError:
        raise WorkflowError(f"{path} is not UTF-8 text") from None
    return parse_text(text, str(path))


def read_document(path: str | Path) -> Workflow:
    """Load a workflow file (`.yaml`, `.yml` or `.json`)."""
    return document_from_data(read_data(path), str(path))
