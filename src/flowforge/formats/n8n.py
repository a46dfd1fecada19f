"""n8n workflows (`{nodes, connections}` JSON) as flowforge documents.

An n8n node passes items along `main` connections; an AI node gets its
model, memory, tools and output parser from sub-nodes wired to it through
`ai_languageModel`, `ai_memory`, `ai_tool` and `ai_outputParser`.  Here
each main node becomes one block (id from its name, the name kept as the
block's `name`, its position in `metadata.layout`), and each sub-node is
folded into its parent (a model string, a conversation, a tool entry, a
response schema).  `main` connections become `after:` (or a router's or
condition's branches); field reads in expressions become references
(`n8n_expressions`).  SaaS, file and database nodes have no counterpart:
they become `unsupported` blocks naming what to use instead.

n8n runs a node once per item; flowforge runs a block once.  Where that
difference matters (Split Out, Limit, Aggregate) the node's report says so.
"""

from __future__ import annotations

import re
from typing import Any

from flowforge.formats import n8n_nodes
from flowforge.formats.n8n_nodes import View
from flowforge.formats._flowgraph import Builder, IdMaker, feed_order, node_title, require_list
from flowforge.formats.base import FormatError, Imported
from flowforge.formats.n8n_expressions import convert_value

__all__ = ["FORMAT", "N8nFormat"]

_SEGMENT_OK = re.compile(r"^[A-Za-z0-9_]+$")


class Flow:
    """One n8n document: its nodes, their connections, and the ids chosen."""

    def __init__(self, data: dict[str, Any], source: str):
        self.source = source
        nodes = require_list(data.get("nodes"), "nodes", source)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.index: dict[str, int] = {}
        for index, node in enumerate(nodes):
            if not isinstance(node, dict):
                raise FormatError("a node must be a mapping", where=f"nodes[{index}]",
                                  source=source)
            title = node_title(node.get("name"), index)
            if not isinstance(node.get("type"), str) or not node["type"]:
                raise FormatError("the node has no `type` (e.g. \"n8n-nodes-base.set\")",
                                  where=f"nodes[{index}] ({title!r})", source=source)
            if not isinstance(node.get("name"), str) or not node["name"]:
                raise FormatError("the node has no `name`", where=f"nodes[{index}]",
                                  source=source)
            if node["name"] in self.nodes:
                raise FormatError(f"two nodes are named {node['name']!r}",
                                  where=f"nodes[{index}]", source=source)
            self.nodes[node["name"]] = node
            self.index[node["name"]] = index
        self.main_in: dict[str, list[tuple[str, int]]] = {name: [] for name in self.nodes}
        self.main_out: dict[str, dict[int, list[str]]] = {name: {} for name in self.nodes}
        self.subs: dict[str, dict[str, list[str]]] = {name: {} for name in self.nodes}
        self.parent: dict[str, str] = {}
        self._connections(data.get("connections") or {})
        ids = IdMaker()
        self.ids = {name: ids.make(name) for name, node in self.nodes.items()
                    if not node["type"].endswith("stickyNote")}
        self.id_maker = ids
        self.views: dict[str, View] = {}
        self.input_keys: dict[str, str] = {}     # form field label -> input name
        self.routes: dict[tuple[str, int], str] = {}   # (routing node, output) -> id to follow

    def _connections(self, connections: Any) -> None:
        if not isinstance(connections, dict):
            raise FormatError("must map node names to their outputs", where="connections",
                              source=self.source)
        for origin, outputs in connections.items():
            where = f"connections[{origin!r}]"
            if origin not in self.nodes:
                raise FormatError(f"unknown node {origin!r} (no node of that name)",
                                  where=where, source=self.source)
            for kind, lists in (outputs or {}).items():
                for output, targets in enumerate(lists or []):
                    for position, target in enumerate(targets or []):
                        name = target.get("node") if isinstance(target, dict) else None
                        if name not in self.nodes:
                            raise FormatError(
                                f"unknown node {name!r} (no node of that name)",
                                where=f"{where}.{kind}[{output}][{position}]",
                                source=self.source)
                        if kind == "main":
                            self.main_out[origin].setdefault(output, []).append(name)
                            self.main_in[name].append((origin, output))
                        else:
                            self.subs[name].setdefault(kind, []).append(origin)
                            self.parent.setdefault(origin, name)

    # -- references -------------------------------------------------------

    def resolve(self, name: str, path: list[str], seen: frozenset[str] = frozenset()
                ) -> str | None:
        """The flowforge reference for `$('name').item.json.<path>`, or None."""
        if name in seen or name not in self.views:
            return None
        view = self.views[name]
        if path and path[0] in self.input_keys and view.open == "input":
            path = [self.input_keys[path[0]], *path[1:]]
        if not all(_SEGMENT_OK.match(step) for step in path):
            return None
        dotted = ".".join(path)
        for prefix in sorted(view.fields, key=len, reverse=True):
            if dotted == prefix or dotted.startswith(prefix + "."):
                return view.fields[prefix] + dotted[len(prefix):]
        if view.open is not None:
            return ".".join([view.open, *path]) if path else None
        if view.passes:
            for origin, _ in self.main_in[name]:
                found = self.resolve(origin, path, seen | {name})
                if found:
                    return found
        return None

    def input_of(self, name: str) -> str | None:
        """The node whose output a node's `$json` reads (a sub-node reads its
        parent's input)."""
        while name in self.parent and not self.main_in[name]:
            name = self.parent[name]
        return self.main_in[name][0][0] if self.main_in[name] else None

    def text(self, value: Any, name: str, builder: Builder) -> Any:
        """A parameter of node `name` with its expressions converted."""
        def resolve(node: str | None, path: list[str]) -> str | None:
            target = node if node is not None else self.input_of(name)
            return self.resolve(target, path) if target else None

        def unmapped(expression: str) -> None:
            builder.note(f"{name!r}: the n8n expression {{{{ {expression} }}}} has no "
                         f"flowforge counterpart; rewrite it as a reference "
                         f"({{{{block.field}}}}) or an expression")
        return convert_value(value, resolve, unmapped)

    def reader(self, name: str):
        """`(node, path) -> reference` as seen from node `name` (conditions)."""
        def resolve(node: str | None, path: list[str]) -> str | None:
            target = node if node is not None else self.input_of(name)
            return self.resolve(target, path) if target else None
        return resolve

    def order(self) -> list[str]:
        """Main nodes, every node after the nodes feeding it (n8n files list
        nodes in the order they were added, not the order they run)."""
        return feed_order(sorted(self.nodes, key=lambda name: self.index[name]),
                          lambda name: [origin for origin, _ in self.main_in[name]])


class N8nFormat:
    name = "n8n"
    title = "n8n workflow JSON"

    def detect(self, data: Any) -> bool:
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            return False
        if "connections" in data:
            return True
        return any(isinstance(node, dict) and isinstance(node.get("type"), str)
                   and ("n8n-nodes-" in node["type"]) for node in data["nodes"])

    def convert(self, data: Any, *, source: str) -> Imported:
        if not isinstance(data, dict):
            raise FormatError("an n8n workflow is a JSON object with `nodes` and "
                              "`connections`", source=source)
        flow = Flow(data, source)
        builder = Builder("n8n", self.title, source)
        notes = []
        for name in flow.order():
            node = flow.nodes[name]
            if node["type"].endswith("stickyNote"):
                text = (node.get("parameters") or {}).get("content")
                if text:
                    notes.append({"text": text, "position": node.get("position")})
                continue
            if name in flow.parent and not flow.main_in[name] and not flow.main_out[name]:
                continue                      # a sub-node: folded into its parent below
            n8n_nodes.convert_node(flow, name, builder)
        for name, parent in flow.parent.items():
            if name in flow.ids and not any(entry.id == flow.ids[name]
                                            for entry in builder.report.nodes):
                n8n_nodes.orphan_sub_node(flow, name, parent, builder)
        if notes:
            builder.note(f"{len(notes)} sticky note(s) kept in metadata.notes")
        if len([name for name in flow.nodes if n8n_nodes.is_trigger(flow.nodes[name])]) > 1:
            builder.note("the workflow has several triggers: a flowforge run starts every "
                         "one of their branches; split it into one document per trigger "
                         "where they are alternatives")
        metadata = {"notes": notes} if notes else {}
        return builder.finish(str(data.get("name") or data.get("id") or "n8n-workflow"),
                              data.get("name"), None, metadata)


FORMAT = N8nFormat()
