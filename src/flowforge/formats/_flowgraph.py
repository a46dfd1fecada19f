"""What the node-graph formats (n8n, Langflow, Flowise) share: turning a
node's name into a flowforge id, the `unsupported` block that keeps a node
without a counterpart visible, and the document being built.

The three editors draw the same thing (nodes on a canvas joined by edges)
and differ only in how a node says what it is; the converters differ there
and meet here, so an id or a layout comes out the same whichever editor the
file came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from flowforge.formats.base import FormatError, Imported, ImportReport, NodeReport

__all__ = ["IdMaker", "Builder", "slug", "model_string", "require_list", "node_title",
           "feed_order"]

#: Template namespaces and words a block id must not take (`{{input.x}}`
#: would read the run's inputs, not a block called "Input").
_RESERVED = {"input", "vars", "env", "memory", "user", "loop", "secrets", "results", "blocks",
             "true", "false", "none", "null", "and", "or", "not", "in", "is"}


def slug(text: str, fallback: str = "node") -> str:
    """`Basic LLM Chain` -> `basic_llm_chain`: lower case, words joined by `_`,
    never starting with a digit (an id must read as a name in expressions)."""
    out = re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")[:60].strip("_")
    if not out:
        out = fallback
    if out[0].isdigit():
        out = f"n_{out}"
    return out


class IdMaker:
    """Unique, valid ids derived from names, the same name always giving the
    same id within one document."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def make(self, name: str, fallback: str = "node") -> str:
        base = slug(name, fallback)
        if base in _RESERVED:
            base = f"{base}_node"
        candidate, number = base, 2
        while candidate in self.taken:
            candidate, number = f"{base}_{number}", number + 1
        self.taken.add(candidate)
        return candidate


def feed_order(nodes: Iterable[str], feeds: Callable[[str], Iterable[str]]) -> list[str]:
    """Every node after the nodes feeding it (`feeds(node)`, in the order they
    should come), starting from `nodes` in their order.  Canvas files list
    nodes in the order they were added, not the order they run; a cycle (a
    loop drawn back) is tolerated, its first node taken first."""
    done: list[str] = []
    state: dict[str, int] = {}
    for start in nodes:
        stack = [(start, False)]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                done.append(name)
                continue
            if state.get(name):
                continue
            state[name] = 1
            stack.append((name, True))
            stack.extend((origin, False) for origin in reversed(list(feeds(name)))
                         if not state.get(origin))
    return done


def require_list(value: Any, where: str, source: str) -> list[Any]:
    if not isinstance(value, list):
        raise FormatError(f"must be a list of nodes, not {type(value).__name__}", where=where,
                          source=source)
    return value


def node_title(name: Any, index: int) -> str:
    return name if isinstance(name, str) and name else f"node {index}"


#: provider prefix of each vendor as the foreign editors name it; a vendor
#: reached through an OpenAI-compatible server is `openai-compatible/<server>/`
_PROVIDERS = {
    "openai": "openai", "anthropic": "anthropic", "google": "google", "gemini": "google",
    "googlegemini": "google", "vertex": "google", "ollama": "openai-compatible/ollama",
    "openrouter": "openai-compatible/openrouter", "groq": "openai-compatible/groq",
    "mistral": "openai-compatible/mistral", "mistralcloud": "openai-compatible/mistral",
    "deepseek": "openai-compatible/deepseek", "azure": "openai-compatible/azure",
    "azureopenai": "openai-compatible/azure", "xai": "openai-compatible/xai",
    "lmstudio": "openai-compatible/lmstudio", "vllm": "openai-compatible/vllm",
}


def model_string(vendor: str, model: str | None) -> str | None:
    """A flowforge model string (DESIGN.md's `provider/name`) for a vendor's
    model as a foreign file names it, or None for a vendor flowforge has no
    provider for."""
    prefix = _PROVIDERS.get(re.sub(r"[^a-z]", "", vendor.lower()))
    if prefix is None or not model:
        return None
    name = str(model).strip()
    if name.startswith("models/"):          # Gemini's `models/gemini-1.5-flash`
        name = name[len("models/"):]
    return f"{prefix}/{name}"


@dataclass
class Builder:
    """The document under construction and its report."""

    format: str
    title: str
    source: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    layout: dict[str, dict[str, float]] = field(default_factory=dict)
    report: ImportReport = field(init=False)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.report = ImportReport(self.format)

    def add(self, block: dict[str, Any], position: Any = None) -> dict[str, Any]:
        self.blocks.append({key: value for key, value in block.items()
                            if value not in (None, "", [])})
        if isinstance(position, dict) and "x" in position and "y" in position:
            position = [position["x"], position["y"]]
        if isinstance(position, (list, tuple)) and len(position) >= 2 and \
                all(isinstance(v, (int, float)) for v in position[:2]):
            self.layout[block["id"]] = {"x": position[0], "y": position[1]}
        return self.blocks[-1]

    def node(self, id: str, title: str, type: str, became: str | None, instead: str = "",
             dropped: list[str] | None = None) -> NodeReport:
        entry = NodeReport(id, title, type, became, instead, list(dropped or []))
        self.report.nodes.append(entry)
        return entry

    def unsupported(self, id: str, title: str, node_type: str, instead: str,
                    position: Any = None, after: list[str] | None = None,
                    description: str | None = None) -> dict[str, Any]:
        """A node without a counterpart: an `unsupported` block that keeps it
        in the document and fails clearly if a run reaches it."""
        self.node(id, title, node_type, None, instead)
        return self.add({"id": id, "type": "unsupported", "name": title,
                         "description": description, "after": after or [],
                         "with": {"format": self.format, "node_type": node_type,
                                  "title": title, "instead": instead}}, position)

    def note(self, text: str) -> None:
        if text not in self.report.notes:
            self.report.notes.append(text)

    def knowledge_base(self, name: str) -> None:
        if name not in self.report.knowledge_bases:
            self.report.knowledge_bases.append(name)

    def finish(self, doc_id: str, name: str | None, description: str | None,
               metadata: dict[str, Any] | None = None) -> Imported:
        meta: dict[str, Any] = {"imported_from": {"format": self.format, "source": self.source}}
        if self.layout:
            meta["layout"] = self.layout
        meta.update(metadata or {})
        document: dict[str, Any] = {"version": 1, "id": IdMaker().make(doc_id, "imported")}
        if name:
            document["name"] = name
        if description:
            document["description"] = description
        if self.inputs:
            document["inputs"] = self.inputs
        document["blocks"] = self.blocks
        document["metadata"] = meta
        return Imported(document, self.report)
