"""The JSON Schema of the workflow format, with every block type's config.

Editors (VS Code's YAML extension, JetBrains) autocomplete and check a
document against it: `# yaml-language-server: $schema=flowforge.schema.json`.
Each block's `with` is tied to its `type` through if/then, so the editor
offers exactly the fields of the block being written, with the docstrings
of the config models as descriptions.  The `type` property lists every
block type twice: `enum` for validators, and `oneOf` entries (`const` +
`description`, the first sentence of the block module's docstring) for an
editor's completion and the web app's palette.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from flowforge.blocks.type_table import block_types
from flowforge.workflow.model import Workflow

__all__ = ["workflow_json_schema"]


def workflow_json_schema() -> dict[str, Any]:
    schema = Workflow.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "flowforge workflow"
    defs = schema.setdefault("$defs", {})
    branches = []
    for name, block_type in sorted(block_types().items()):
        config_schema = block_type.Config.model_json_schema(ref_template="#/$defs/{model}")
        for key, value in config_schema.pop("$defs", {}).items():
            defs.setdefault(key, value)
        config_name = f"{name.title().replace('_', '')}BlockConfig"
        defs[config_name] = config_schema
        branches.append({"if": {"properties": {"type": {"const": name}}, "required": ["type"]},
                         "then": {"properties": {"with": {"$ref": f"#/$defs/{config_name}"}}}})
    block = defs.get("BlockSpec")
    if block is not None:
        block["properties"]["type"]["enum"] = sorted(block_types())
        block["properties"]["type"]["oneOf"] = [
            {"const": name, "description": _summary(block_type)}
            for name, block_type in sorted(block_types().items())]
        block["properties"]["type"].pop("anyOf", None)
        block["properties"]["type"]["type"] = "string"
        block["allOf"] = branches
    return schema


def _summary(block_type: type) -> str:
    """`agent`'s module docstring "`agent`: a model with ... tools.\n\nMore."
    -> "A model with ... tools.": one line for a palette or a hover."""
    module = sys.modules.get(block_type.__module__)
    text = (getattr(module, "__doc__", None) or block_type.__doc__ or "").strip()
    paragraph = " ".join(text.split("\n\n")[0].split())
    paragraph = re.sub(r"^`[^`]+`:\s*", "", paragraph)
    sentence = re.split(r"(?<=[.?!])\s", paragraph, maxsplit=1)[0]
    return sentence[:1].upper() + sentence[1:]
