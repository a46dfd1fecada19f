"""Reading workflow documents from YAML or JSON, with located errors.

Malformed text is reported with its line and column; a document that parses
but does not fit the format is reported as the list of located problems from
the Pydantic model, never as a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from flowforge.errors import Problem, ValidationFailed, WorkflowError
from flowforge.workflow.compile import format_loc
from flowforge.workflow.model import Workflow

__all__ = ["parse_text", "read_document", "document_from_data"]


def parse_text(text: str, source: str = "<text>") -> Any:
    """YAML or JSON text -> plain data (JSON is YAML, but its errors read better)."""
    if source.endswith(".json") or text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            if source.endswith(".json"):
                raise WorkflowError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: "
                                    f"{exc.msg}", source=source) from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = exc.problem or exc.context or "malformed YAML"
        raise WorkflowError(f"invalid YAML{at}: {reason}", source=source) from None
    except yaml.YAMLError as exc:
        raise WorkflowError(f"invalid YAML: {exc}", source=source) from None


def document_from_data(data: Any, source: str = "<data>") -> Workflow:
    """Plain data -> Workflow, or ValidationFailed listing each located problem."""
    if not isinstance(data, dict):
        raise WorkflowError("a workflow document must be a mapping with `id` and `blocks`",
                            source=source)
    try:
        return Workflow.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            # Pydantic reports each branch of `retry: RetryPolicy | int`; keep the readable one.
            loc = tuple(part for part in loc if part not in ("RetryPolicy", "int"))
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = f"unknown field '{loc[-1]}'"
            elif error["type"] == "missing":
                message = "required field is missing"
            problems.append(Problem(format_loc(loc), message))
        unique = list(dict.fromkeys(problems))
        raise ValidationFailed(unique, source=source) from None


def read_document(path: str | Path) -> Workflow:
    """Load a workflow file (`.yaml`, `.yml` or `.json`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkflowError(f"no such workflow file: {path}") from None
    except IsADirectoryError:
        raise WorkflowError(f"{path} is a directory, not a workflow file") from None
    except UnicodeDecodeError:
        raise WorkflowError(f"{path} is not UTF-8 text") from None
    return document_from_data(parse_text(text, str(path)), str(path))
