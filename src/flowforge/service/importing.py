"""Importing a foreign workflow file: the formats room, then flowforge's own checks.

`flowforge import` and the server's `POST /api/import` both come here, so
they read a file the same way and refuse the same files: the text is parsed
within the loader's limits (two JSON documents glued together are named as
such), the room picks the format and converts it under its policy (nodes
without a counterpart refuse the import unless a partial one is asked for),
and the document it gives must load as a flowforge document before anyone
writes or shows it as the result.

Every failure is a FlowforgeError with one clear message: `FormatError` (the
file is not a format flowforge reads, or is broken, with the place),
`ImportRefused` (the list of nodes without a counterpart), `WorkflowError`
(the converted document does not validate, located in it).
"""

from __future__ import annotations

from typing import Any

import yaml

from flowforge.errors import ValidationFailed
from flowforge.formats import FormatError, Imported, detect, import_data, parse_foreign
from flowforge.service.loading import compile_document
from flowforge.workflow.graph import CompiledWorkflow
from flowforge.workflow.loader import document_from_data

__all__ = ["import_text", "check_imported", "document_yaml"]


def import_text(text: str, source: str, *, partial: bool = False, format: str | None = None,
                base_url: str | None = None) -> Imported:
    """The document and report of a foreign file's text.  `format` names the
    format (else it is detected); `base_url` is where an Agent's relative
    event endpoints point.  A flowforge document (one with `blocks:`) is not
    imported: it is said so, since it runs as it is."""
    data = parse_foreign(text, source)
    if format is None and isinstance(data, dict) and isinstance(data.get("blocks"), list) \
            and detect(data) is None:
        raise FormatError("is already a flowforge document (it has `blocks:`): validate or run "
                          "it as it is", source=source)
    return import_data(data, source=source, partial=partial, format=format,
                       options={"agent": {"base_url": base_url}})


def check_imported(imported: Imported, source: str) -> CompiledWorkflow:
    """The imported document, validated and compiled as the flowforge document
    that will be written (what a later `flowforge run` of it reads): a
    ValidationFailed locates each problem in the converted document."""
    label = f"{source} (as imported)"
    try:
        return compile_document(document_from_data(imported.document, label))
    except ValidationFailed as exc:
        raise ValidationFailed(exc.problems, source=label) from None


class _Dumper(yaml.SafeDumper):
    """Multi-line text (prompts) as `|` blocks, so the file reads like the prompt."""


def _text(dumper: yaml.SafeDumper, value: str) -> Any:
    if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" "):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _text)


def document_yaml(data: Any) -> str:
    """A document as YAML text, keys in the document's order, prompts as blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
