"""Flowise chatflows and agentflows (`{nodes, edges}` JSON) as flowforge documents.

A chatflow node (`data.name`: `llmChain`, `toolAgent`, `chatOpenAI`, ...)
takes other nodes as inputs written `{{chatOpenAI_0.data.instance}}`: the
model, prompt, memory, tools, output parser and vector store of a chain or
an agent are sub-nodes, folded here into the block they serve (a model
string, the prompt and its values, a conversation, tool entries, a schema,
a knowledge base to create); the chains and agents become blocks
(`flowise_nodes`).  The chat question (`{{question}}`) is the run input
`query`.

An agentflow (v2, nodes of type `agentFlow`) is a graph of steps joined by
edges: Start, LLM, Agent, Condition, HTTP, Direct Reply each become a
block; their messages are HTML from a rich-text editor whose `{{ question }}`
and `{{ llmAgentflow_0 }}` mentions become references.

Ids are the slug of each node's label, titles and descriptions are kept,
positions go to `metadata.layout`, sticky notes to `metadata.notes`.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from flowforge.formats._flowgraph import Builder, IdMaker, feed_order, require_list
from flowforge.formats.base import FormatError, Imported

__all__ = ["FORMAT", "FlowiseFormat", "Graph"]

_INSTANCE = re.compile(r"\{\{\s*([A-Za-z0-9_\-]+)\.data\.instance\s*\}\}")


def instances(value: Any) -> list[str]:
    """Node ids a chatflow input names (`{{id.data.instance}}`, alone or in a list
    written as text)."""
    if isinstance(value, list):
        return [found for item in value for found in instances(item)]
    return _INSTANCE.findall(value) if isinstance(value, str) else []


def _field_of(handle: Any, target: str) -> str | None:
    """`llmChain_0-input-model-BaseLanguageModel` -> `model`."""
    if isinstance(handle, str) and handle.startswith(f"{target}-input-"):
        return handle[len(target) + len("-input-"):].split("-")[0]
    return None


class Graph:
    """One Flowise flow: nodes by id, their inputs, the edges both ways."""

    def __init__(self, data: dict[str, Any], source: str):
        self.source = source
        nodes = require_list(data.get("nodes"), "nodes", source)
        edges = data.get("edges") if data.get("edges") is not None else []
        if not isinstance(edges, list):
            raise FormatError("must be a list of edges", where="edges", source=source)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.kind: dict[str, str] = {}
        self.title: dict[str, str] = {}
        self.notes: list[dict[str, Any]] = []
        self.id_maker = IdMaker()
        self.ids: dict[str, str] = {}
        self.agentflow = any(isinstance(n, dict) and n.get("type") == "agentFlow" for n in nodes)
        for index, node in enumerate(nodes):
            where = f"nodes[{index}]"
            if not isinstance(node, dict) or not isinstance(node.get("data"), dict):
                raise FormatError("a node must be a mapping with `data`", where=where,
                                  source=source)
            body = node["data"]
            node_id = node.get("id") or body.get("id")
            if not isinstance(node_id, str) or not node_id:
                raise FormatError("the node has no `id`", where=where, source=source)
            kind = body.get("name")
            if not isinstance(kind, str) or not kind:
                raise FormatError("the node has no `data.name` (its type, e.g. \"llmChain\")",
                                  where=f"{where} ({node_id!r})", source=source)
            if node_id in self.nodes:
                raise FormatError(f"two nodes have the id {node_id!r}", where=where,
                                  source=source)
            if kind in ("stickyNote", "stickyNoteAgentflow"):
                text = (body.get("inputs") or {}).get("note")
                if text:
                    self.notes.append({"text": text, "position": node.get("position")})
                continue
            self.nodes[node_id] = node
            self.kind[node_id] = kind
            self.title[node_id] = str(body.get("label") or kind)
            self.ids[node_id] = self.id_maker.make(self.title[node_id])
        self.ins: dict[str, list[tuple[str, str | None, str | None]]] = \
            {n: [] for n in self.nodes}
        self.outs: dict[str, list[tuple[str, str | None]]] = {n: [] for n in self.nodes}
        for index, edge in enumerate(edges):
            if not isinstance(edge, dict):
                raise FormatError("an edge must be a mapping", where=f"edges[{index}]",
                                  source=source)
            ends = (edge.get("source"), edge.get("target"))
            for end in ends:
                if end not in self.nodes:
                    raise FormatError(f"unknown node {end!r} (no node has that id)",
                                      where=f"edges[{index}]", source=source)
            handle = edge.get("sourceHandle")
            output = handle.rsplit("-output-", 1)[-1] if isinstance(handle, str) else None
            self.ins[ends[1]].append((ends[0], _field_of(edge.get("targetHandle"), ends[1]),
                                      output))
            self.outs[ends[0]].append((ends[1], output))
        for node_id in self.nodes:                 # inputs name their sub-nodes too
            for field, value in self.inputs(node_id).items():
                for origin in instances(value):
                    if origin not in self.nodes:
                        raise FormatError(f"unknown node {origin!r} (no node has that id)",
                                          where=f"{node_id}.inputs.{field}", source=source)
        #: node id -> flowforge path its output is read at
        self.refs: dict[str, str] = {}
        self.blocked: set[str] = set()

    def inputs(self, node_id: str) -> dict[str, Any]:
        return self.nodes[node_id]["data"].get("inputs") or {}

    def input(self, node_id: str, field: str, default: Any = None) -> Any:
        value = self.inputs(node_id).get(field)
        return default if value in (None, "", [], {}) else value

    def subs(self, node_id: str, field: str) -> list[str]:
        """The nodes wired into one input (by the input's text, else by edges)."""
        found = instances(self.inputs(node_id).get(field))
        found += [origin for origin, name, _ in self.ins[node_id]
                  if name == field and origin not in found]
        return found

    def description(self, node_id: str) -> str | None:
        return self.nodes[node_id]["data"].get("description") or None

    def position(self, node_id: str) -> Any:
        return self.nodes[node_id].get("position")

    def after(self, node_id: str) -> list[str]:
        return list(dict.fromkeys(self.ids[origin] for origin, _, _ in self.ins[node_id]
                                  if origin in self.blocked))

    def order(self) -> list[str]:
        """Every node after the nodes feeding it (edges and instance inputs)."""
        return feed_order(self.nodes, lambda name: [o for o, _, _ in self.ins[name]] +
                          [o for value in self.inputs(name).values() for o in instances(value)])


def parse_list(value: Any) -> Any:
    """Flowise stores some lists and objects as Python-ish text (`"['a', 'b']"`)."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        for parse in (json.loads, ast.literal_eval):
            try:
                return parse(value)
            except (ValueError, SyntaxError):
                continue
    return value


class FlowiseFormat:
    name = "flowise"
    title = "Flowise chatflow or agentflow JSON"

    def detect(self, data: Any) -> bool:
        """`{nodes, edges}` whose nodes carry Flowise's `data.name` with
        `inputs` or anchors (Langflow's carry `data.node`, n8n's a `type` string)."""
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or \
                "connections" in data or not isinstance(data.get("edges", []), list):
            return False
        return any(isinstance(node, dict) and isinstance(node.get("data"), dict)
                   and isinstance(node["data"].get("name"), str)
                   and "node" not in node["data"]
                   and any(key in node["data"] for key in ("inputs", "inputAnchors",
                                                           "inputParams", "category"))
                   for node in data["nodes"])

    def convert(self, data: Any, *, source: str) -> Imported:
        from flowforge.formats import flowise_agentflow, flowise_nodes

        if not isinstance(data, dict):
            raise FormatError("a Flowise flow is a JSON object with `nodes` and `edges`",
                              source=source)
        graph = Graph(data, source)
        builder = Builder("flowise", self.title, source)
        (flowise_agentflow if graph.agentflow else flowise_nodes).convert(graph, builder)
        if graph.notes:
            builder.note(f"{len(graph.notes)} sticky note(s) kept in metadata.notes")
        name = data.get("name") if isinstance(data.get("name"), str) else None
        metadata = {"notes": graph.notes} if graph.notes else {}
        stem = Path(source).stem if not source.startswith("<") else ""
        return builder.finish(name or stem or ("flowise-agentflow" if graph.agentflow
                                               else "flowise-chatflow"),
                              name, data.get("description") or None, metadata)


FORMAT = FlowiseFormat()
