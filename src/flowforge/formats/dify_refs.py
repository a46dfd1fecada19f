"""Dify's variable references as flowforge references.

Dify writes `{{#node_id.field#}}` in text and `[node_id, field]` selectors
in node settings.  Both become `{{ns.path}}`: a start node's variables are
`input.*`, `sys.query` the chat input, `conversation.*` per-user memory,
`env.*` the document's variables, an iteration's `item`/`index` the loop's,
and an output field renamed where flowforge's block names it otherwise
(an LLM's `text` is its `content`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Refs", "DIFY_REF", "RENAMES"]

DIFY_REF = re.compile(r"\{\{#([^#{}]+)#\}\}")
_BARE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

#: Dify output field -> flowforge output field, per flowforge block type
RENAMES = {
    "llm": {"text": "content"}, "agent": {"text": "content"},
    "knowledge": {"result": "results"},
    "http": {"body": "data", "status_code": "status", "text": "data"},
    "router": {"class_name": "selectedRoute"},
    "web_search": {"text": "context", "json": "results"},
}
_SYS = {"query": "input.query", "conversation_id": "input.conversation",
        "files": "input.files", "user_id": "user.id", "dialogue_count": "input.dialogue_count",
        "app_id": "input.app_id", "workflow_id": "input.workflow_id",
        "workflow_run_id": "input.workflow_run_id"}


@dataclass
class Refs:
    """What a reference needs to know of the document being converted."""

    start_ids: set[str] = field(default_factory=set)
    became: dict[str, str] = field(default_factory=dict)       # node id -> flowforge type
    iterations: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)      # node id -> block id read
    unmapped: list[str] = field(default_factory=list)
    sys_used: set[str] = field(default_factory=set)
    memory: set[str] = field(default_factory=set)
    bare: set[str] = field(default_factory=set)                # `{{name}}`: inputs

    def path(self, selector: Any) -> str | None:
        """`[node, field, ...]` -> `node.field...` (flowforge spelling), or None."""
        if not isinstance(selector, (list, tuple)) or len(selector) < 2:
            return None
        node, *rest = [str(part) for part in selector]
        if rest and rest[0].startswith("sys."):          # older files: [start, "sys.query"]
            node, rest = "sys", [rest[0][4:], *rest[1:]]
        if node == "sys":
            self.sys_used.add(rest[0])
            mapped = _SYS.get(rest[0])
            if mapped is None:
                self.unmapped.append(f"sys.{rest[0]}")
                return f"input.{rest[0]}"
            return ".".join([mapped, *rest[1:]])
        if node == "conversation":
            self.memory.add(rest[0])
            return ".".join(["memory", *rest])
        if node == "env":
            return ".".join(["vars", *rest])
        if node in self.start_ids:
            return ".".join(["input", *rest])
        if node in self.iterations and rest[0] in ("item", "index"):
            return f"loop.{rest[0]}"
        kind = self.became.get(node)
        first = RENAMES.get(kind or "", {}).get(rest[0], rest[0])
        return ".".join([self.aliases.get(node, node), first, *rest[1:]])

    def ref(self, selector: Any) -> str:
        path = self.path(selector)
        return "{{" + path + "}}" if path else ""

    def text(self, value: Any) -> Any:
        """Text with every `{{#a.b#}}` a flowforge reference (other values as they are)."""
        if not isinstance(value, str):
            return value

        def one(match: re.Match) -> str:
            inner = match.group(1).strip()
            if inner == "context":
                return "{{#context#}}"          # an LLM's context: the node fills it in
            path = self.path(inner.split("."))
            return "{{" + path + "}}" if path else match.group(0)

        text = DIFY_REF.sub(one, value)
        return _BARE.sub(self._bare, text)

    def _bare(self, match: re.Match) -> str:
        """`{{name}}` as older Dify prompts write a start variable: `{{input.name}}`."""
        name = match.group(1)
        if name in self.memory:
            return "{{memory." + name + "}}"
        self.bare.add(name)
        return "{{input." + name + "}}"

    def nodes_in(self, value: Any) -> set[str]:
        """The node ids a text reads (edges Dify draws as lines)."""
        if not isinstance(value, str):
            return set()
        return {m.group(1).split(".")[0] for m in DIFY_REF.finditer(value)}
