"""Langflow flows (`{data: {nodes, edges}}` JSON) as flowforge documents.

A Langflow node is a component (`data.type`: `ChatInput`, `Prompt`,
`OpenAIModel`, ...) whose fields (`data.node.template`) hold typed values;
an edge carries one output of a node (`sourceHandle.name`) into one field of
another (`targetHandle.fieldName`).  Most edges carry text (a Message): they
become references (`{{openai.content}}`).  The others hand over an object:
a language model into an agent, tools into an agent, embeddings and chunks
into a vector store, a memory into a prompt.  Those sub-nodes are folded
into the block they serve (a model string, tool entries, a knowledge base
to create, a conversation) and reported as such (`langflow_nodes`).

Ids are the slug of each node's display name (`Chat Input` ->
`chat_input`), titles and descriptions are kept, positions go to
`metadata.layout`, notes to `metadata.notes`.
"""

from __future__ import annotations

import json
from typing import Any

from flowforge.formats._flowgraph import Builder, IdMaker, feed_order, require_list
from flowforge.formats.base import FormatError, Imported

__all__ = ["FORMAT", "LangflowFormat", "Graph"]


def _root(data: Any) -> Any:
    """The `{nodes, edges}` of a Langflow export (under `data`) or of a bare graph."""
    if isinstance(data, dict) and isinstance(data.get("data"), dict) and \
            "nodes" in data["data"]:
        return data["data"]
    return data


def _handle(edge: dict[str, Any], key: str, field: str) -> Any:
    """A field of an edge's handle: the parsed `data` copy, else the handle
    string (JSON with `œ` for quotes)."""
    parsed = (edge.get("data") or {}).get(key)
    if isinstance(parsed, dict) and parsed.get(field):
        return parsed[field]
    text = edge.get(key)
    if isinstance(text, str) and text.startswith("{"):
        try:
            return json.loads(text.replace("œ", '"')).get(field)
        except (ValueError, AttributeError):
            return None
    return None


class Graph:
    """One Langflow flow: its nodes by id, their fields, the edges both ways
    and the block ids chosen."""

    def __init__(self, data: dict[str, Any], source: str):
        self.source = source
        root = _root(data)
        prefix = "data." if root is not data else ""
        nodes = require_list(root.get("nodes"), f"{prefix}nodes", source)
        edges = root.get("edges") if root.get("edges") is not None else []
        if not isinstance(edges, list):
            raise FormatError("must be a list of edges", where=f"{prefix}edges", source=source)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.kind: dict[str, str] = {}
        self.title: dict[str, str] = {}
        self.notes: list[dict[str, Any]] = []
        ids = IdMaker()
        self.id_maker = ids
        self.ids: dict[str, str] = {}
        for index, node in enumerate(nodes):
            where = f"{prefix}nodes[{index}]"
            if not isinstance(node, dict) or not isinstance(node.get("data"), dict):
                raise FormatError("a node must be a mapping with `data`", where=where,
                                  source=source)
            body = node["data"]
            if node.get("type") == "noteNode" or body.get("type") == "note":
                text = ((body.get("node") or {}).get("description"))
                if text:
                    self.notes.append({"text": text, "position": node.get("position")})
                continue
            node_id = node.get("id") or body.get("id")
            if not isinstance(node_id, str) or not node_id:
                raise FormatError("the node has no `id`", where=where, source=source)
            kind = body.get("type")
            if not isinstance(kind, str) or not kind:
                raise FormatError("the node has no `data.type` (its component, e.g. "
                                  "\"ChatInput\")", where=f"{where} ({node_id!r})",
                                  source=source)
            if node_id in self.nodes:
                raise FormatError(f"two nodes have the id {node_id!r}", where=where,
                                  source=source)
            self.nodes[node_id] = node
            self.kind[node_id] = kind
            self.title[node_id] = str((body.get("node") or {}).get("display_name")
                                      or body.get("display_name") or kind)
            self.ids[node_id] = ids.make(self.title[node_id])
        self.ins: dict[str, dict[str, list[tuple[str, str]]]] = {n: {} for n in self.nodes}
        self.outs: dict[str, list[tuple[str, str, str]]] = {n: [] for n in self.nodes}
        for index, edge in enumerate(edges):
            where = f"{prefix}edges[{index}]"
            if not isinstance(edge, dict):
                raise FormatError("an edge must be a mapping", where=where, source=source)
            ends = (edge.get("source"), edge.get("target"))
            for end in ends:
                if end not in self.nodes:
                    raise FormatError(f"unknown node {end!r} (no node has that id)",
                                      where=where, source=source)
            output = str(_handle(edge, "sourceHandle", "name") or "output")
            field = str(_handle(edge, "targetHandle", "fieldName") or "input_value")
            self.ins[ends[1]].setdefault(field, []).append((ends[0], output))
            self.outs[ends[0]].append((output, ends[1], field))
        #: node id -> output name -> flowforge path its value is read at
        self.refs: dict[str, dict[str, str]] = {}
        #: node id -> (reference to a list of items, Jinja expression of an item's text)
        self.items: dict[str, tuple[str, str]] = {}
        self.blocked: set[str] = set()        # nodes that became a block

    # -- fields -----------------------------------------------------------

    def template(self, node_id: str) -> dict[str, Any]:
        return ((self.nodes[node_id]["data"].get("node") or {}).get("template")) or {}

    def value(self, node_id: str, field: str, default: Any = None) -> Any:
        entry = self.template(node_id).get(field)
        value = entry.get("value") if isinstance(entry, dict) else None
        return default if value in (None, "") else value

    def sources(self, node_id: str, field: str) -> list[tuple[str, str]]:
        return self.ins[node_id].get(field, [])

    def ref(self, node_id: str, output: str) -> str | None:
        """`{{path}}` of one output of a converted node, or None."""
        view = self.refs.get(node_id)
        if view is None:
            return None
        path = view.get(output) or view.get("*")
        return "{{" + path + "}}" if path else None

    def field(self, node_id: str, field: str, b: Builder) -> Any:
        """A field's value: a reference to what is wired into it, else the
        value typed into the editor."""
        for origin, output in self.sources(node_id, field):
            found = self.ref(origin, output)
            if found is not None:
                return found
            b.note(f"{self.title[node_id]!r}: its field {field!r} reads "
                   f"{self.title[origin]!r}, which has no output flowforge can read")
        return self.value(node_id, field, "")

    def after(self, node_id: str, skip: tuple[str, ...] = ()) -> list[str]:
        return list(dict.fromkeys(self.ids[origin] for field, pairs in
                                  self.ins[node_id].items() if field not in skip
                                  for origin, _ in pairs if origin in self.blocked))

    def description(self, node_id: str) -> str | None:
        body = self.nodes[node_id]["data"]
        return body.get("description") or (body.get("node") or {}).get("description") or None

    def position(self, node_id: str) -> Any:
        return self.nodes[node_id].get("position")

    def order(self) -> list[str]:
        """Every node after the nodes feeding it."""
        return feed_order(self.nodes, lambda name: [origin for pairs in self.ins[name].values()
                                                    for origin, _ in pairs])


class LangflowFormat:
    name = "langflow"
    title = "Langflow flow JSON"

    def detect(self, data: Any) -> bool:
        """`{data: {nodes, edges}}` (or a bare `{nodes, edges}`) whose nodes are
        Langflow components: `data.type` and `data.node.template`."""
        root = _root(data)
        if not isinstance(root, dict) or not isinstance(root.get("nodes"), list) or \
                "connections" in root:
            return False
        return any(isinstance(node, dict) and isinstance(node.get("data"), dict)
                   and isinstance(node["data"].get("type"), str)
                   and isinstance(node["data"].get("node"), dict)
                   and "template" in node["data"]["node"] for node in root["nodes"])

    def convert(self, data: Any, *, source: str) -> Imported:
        from flowforge.formats import langflow_nodes

        if not isinstance(data, dict):
            raise FormatError("a Langflow flow is a JSON object with `data: {nodes, edges}`",
                              source=source)
        graph = Graph(data, source)
        builder = Builder("langflow", self.title, source)
        langflow_nodes.convert(graph, builder)
        if graph.notes:
            builder.note(f"{len(graph.notes)} note(s) kept in metadata.notes")
        name = data.get("name") if isinstance(data.get("name"), str) else None
        metadata = {"notes": graph.notes} if graph.notes else {}
        return builder.finish(name or str(data.get("id") or "langflow-flow"), name,
                              data.get("description") or None, metadata)


FORMAT = LangflowFormat()
