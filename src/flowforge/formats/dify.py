"""Dify DSL (YAML apps, `kind: app`): workflows and chatflows.

A Dify app is `app: {mode: workflow | advanced-chat, name, description}` and
`workflow: {graph: {nodes, edges}, environment_variables,
conversation_variables}`.  The document keeps the author's node ids, titles,
descriptions, prompts, branches and iterations; node positions go to
`metadata.layout`.  What each node type becomes (dify_nodes.py):

| Dify | flowforge |
| --- | --- |
| start | typed `inputs` (a chatflow adds `query` and `conversation`) |
| llm | `llm`; in a chatflow with memory, `agent` with `conversation` |
| answer, end | `response` |
| code (Python) | `code`; JavaScript is reported, not run |
| template-transform, Jinja2 prompts | `template` |
| knowledge-retrieval | `knowledge` naming a base of the dataset's id (listed to create) |
| if-else | `condition` |
| question-classifier | `router` |
| parameter-extractor | `llm` with an output schema |
| iteration (+ its nodes) | `parallel` (or one at a time) and a `set` gathering its output |
| http-request | `http` |
| tool | `web_search` (search tools), `http` (Jina reader), else `unsupported` |
| agent (langgenius strategies) | `agent` |
| assigner | `set` writing per-user memory (`conversation.*` is `memory.*`) |
| variable-aggregator | `set` joining the branches that ran |

References `{{#node.field#}}` and selectors become `{{node.field}}`
(dify_refs.py).  Every setting left behind is named in the node's report.
"""

from __future__ import annotations

import re
from typing import Any

from flowforge.formats.base import FormatError, Imported, ImportReport, NodeReport
from flowforge.formats.dify_nodes import CONVERTERS, Context, unsupported
from flowforge.formats.dify_refs import Refs

__all__ = ["FORMAT", "DifyFormat"]

_SKIP = {"iteration-start", "loop-start", "", "custom-note"}
_INPUT_TYPES = {"text-input": "string", "paragraph": "string", "select": "string",
                "number": "number", "file": "object", "file-list": "array"}


def _block_id(node_id: str) -> str:
    """A Dify id as a block id: digits get a letter in front, other marks are `_`."""
    text = re.sub(r"[^A-Za-z0-9_]", "_", node_id)
    return text if text[:1].isalpha() or text[:1] == "_" else f"n{text}"


class DifyFormat:
    name = "dify"
    title = "Dify DSL"

    def detect(self, data: Any) -> bool:
        return isinstance(data, dict) and isinstance(data.get("workflow"), dict) and \
            isinstance(data.get("app"), dict) and "graph" in data["workflow"]

    def convert(self, data: Any, *, source: str) -> Imported:
        app, workflow = data.get("app") or {}, data.get("workflow") or {}
        graph = workflow.get("graph") or {}
        nodes = graph.get("nodes")
        if not isinstance(nodes, list):
            raise FormatError("workflow.graph.nodes is not a list", source=source)
        chat = app.get("mode") in ("advanced-chat", "chat", "agent-chat")
        report = ImportReport("dify")
        by_id: dict[str, dict] = {}
        for index, node in enumerate(nodes):
            data_ = node.get("data") if isinstance(node, dict) else None
            if not isinstance(data_, dict) or "id" not in node:
                raise FormatError("a node without `id` and `data`", f"workflow.graph.nodes"
                                  f"[{index}]", source)
            if "type" not in data_:
                raise FormatError(f"node '{node['id']}' has no type", f"workflow.graph.nodes"
                                  f"[{index}].data", source)
            by_id[str(node["id"])] = node
        ids = {node_id: _block_id(node_id) for node_id in by_id}
        refs = Refs(start_ids={i for i, n in by_id.items() if n["data"]["type"] == "start"},
                    iterations={i for i, n in by_id.items()
                                if n["data"]["type"] in ("iteration", "loop")},
                    aliases=dict(ids))
        for node_id, node in by_id.items():
            refs.became[node_id] = _kind(node["data"], chat)
        out_edges: dict[str, list[tuple[str, str]]] = {}
        in_edges: dict[str, list[str]] = {}
        for edge in graph.get("edges") or []:
            source_id, target = str(edge.get("source")), str(edge.get("target"))
            if source_id in by_id and target in by_id:
                out_edges.setdefault(source_id, []).append(
                    (str(edge.get("sourceHandle") or "source"), ids[target]))
                in_edges.setdefault(target, []).append(source_id)
        ctx = Context(refs, {ids[k]: v for k, v in out_edges.items()}, chat)
        # tools decide their kind (search, reader) before anything reads them
        for node_id, node in by_id.items():
            if node["data"]["type"] == "tool":
                probe = NodeReport(node_id, "", "tool", None)
                CONVERTERS["tool"](ids[node_id], node["data"], Context(Refs(), {}, chat), probe)
                refs.became[node_id] = probe.became or ""

        def parent(node: dict) -> str | None:
            found = node.get("parentId") or node["data"].get("iteration_id")
            return str(found) if found else None

        layout: dict[str, dict] = {}

        def scope(parent_id: str | None) -> list[dict]:
            blocks: list[dict] = []
            for node_id, node in by_id.items():
                if parent(node) != parent_id or node["data"]["type"] in _SKIP | {"start"}:
                    continue
                blocks.extend(self._node(node_id, node, ids, in_edges, by_id, ctx, report,
                                         scope))
                position = node.get("position") or {}
                if isinstance(position.get("x"), (int, float)):
                    layout[ids[node_id]] = {"x": round(position["x"]),
                                            "y": round(position.get("y") or 0)}
            return blocks

        blocks = scope(None)
        document: dict[str, Any] = {"version": 1, "id": _slug(app.get("name") or "dify-app"),
                                    "name": app.get("name") or "Dify app"}
        if app.get("description"):
            document["description"] = app["description"]
        document["inputs"] = self._inputs(by_id, refs, chat, report)
        variables = {str(v.get("name")): v.get("value") for v in
                     workflow.get("environment_variables") or [] if v.get("name")}
        for v in workflow.get("environment_variables") or []:
            if v.get("value_type") == "secret":
                variables[str(v.get("name"))] = ""
                report.notes.append(f"environment variable {v.get('name')} is a secret: its "
                                    f"value is not in the file; set it under `variables:`")
        if variables:
            document["variables"] = variables
        memory = sorted(refs.memory | {str(v.get("name")) for v in
                                       workflow.get("conversation_variables") or []})
        if memory:
            document["memory"] = memory
            report.notes.append("conversation variables are per-user memory keys "
                                "(`memory:`), kept across runs of the same user")
        document["blocks"] = blocks
        document["metadata"] = {"layout": layout, "imported_from": {
            "format": "dify", "mode": app.get("mode"), "version": data.get("version")}}
        report.knowledge_bases = ctx.knowledge_bases
        report.notes += ctx.notes
        for name in sorted(set(refs.unmapped)):
            report.notes.append(f"{{{{#{name}#}}}} has no flowforge counterpart: it reads the "
                                f"run input of the same name")
        return Imported(document, report)

    def _node(self, node_id: str, node: dict, ids: dict[str, str],
              in_edges: dict[str, list[str]], by_id: dict[str, dict], ctx: Context,
              report: ImportReport, scope: Any) -> list[dict]:
        data = node["data"]
        kind = str(data["type"])
        block_id = ids[node_id]
        entry = NodeReport(node_id, str(data.get("title") or ""), kind, None)
        report.nodes.append(entry)
        if kind in ("iteration", "loop"):
            blocks = self._iteration(block_id, node_id, data, ctx, entry, scope)
        elif kind in CONVERTERS:
            blocks = CONVERTERS[kind](block_id, data, ctx, entry)
        else:
            blocks = unsupported(block_id, data, f"Dify's {kind} node has no flowforge "
                                 f"counterpart yet; replace it with a code or http block",
                                 entry)
        main = next((b for b in blocks if b["id"] == block_id), blocks[-1])
        if data.get("title") and str(data["title"]) != block_id:     # an id is no name
            main.setdefault("name", str(data["title"]))
        if data.get("desc"):
            main["description"] = str(data["desc"])
        sources = [ids[s] for s in in_edges.get(node_id, []) if s in by_id
                   and by_id[s]["data"]["type"] not in ("start", *_SKIP)]
        if kind in ("variable-aggregator", "variable-assigner"):
            read = [ids[p] for p in _read_nodes(data) if p in ids]
            sources = list(dict.fromkeys(sources + read))
        if len(sources) > 1:
            main["after"] = {"any": sources}
        elif sources:
            main["after"] = sources
        for field in ("retry_config", "error_strategy", "default_value"):
            if data.get(field) and (field != "retry_config" or data[field].get("retry_enabled")):
                entry.dropped.append(f"{field}: set `retry:` or `on_error:` on the block")
        return blocks

    def _iteration(self, block_id: str, node_id: str, data: dict, ctx: Context,
                   entry: NodeReport, scope: Any) -> list[dict]:
        entry.became = "parallel"
        children = scope(node_id)
        for child in children:                    # the iteration's first nodes have no edge
            if child.get("after") == []:
                child.pop("after")
        each = f"{block_id}_each"
        parallel = data.get("is_parallel")
        with_ = {"for_each": ctx.refs.ref(data.get("iterator_selector")),
                 "max_concurrency": int(data.get("parallel_nums") or 10) if parallel else 1}
        output = data.get("output_selector") or []
        gathered: dict[str, Any] = {"output": None}
        if len(output) >= 2:
            path = ctx.refs.path(output) or ""
            child_id, _, field = path.partition(".")
            gathered["output"] = {"expr": f"pluck(pluck({each}.results, '{child_id}'), "
                                          f"'{field}')"}
        if data.get("error_handle_mode") not in (None, "terminated"):
            entry.dropped.append(f"error_handle_mode: {data['error_handle_mode']} (a failed "
                                 f"item fails the iteration)")
        return [{"id": each, "type": "parallel", "name": f"{data.get('title') or block_id} "
                 f"(items)", "with": with_, "blocks": children},
                {"id": block_id, "type": "set", "with": gathered, "after": [each]}]

    @staticmethod
    def _inputs(by_id: dict[str, dict], refs: Refs, chat: bool,
                report: ImportReport) -> dict[str, Any]:
        inputs: dict[str, Any] = {}
        for node in by_id.values():
            if node["data"]["type"] != "start":
                continue
            for variable in node["data"].get("variables") or []:
                name = str(variable.get("variable"))
                schema: dict[str, Any] = {"type": _INPUT_TYPES.get(str(variable.get("type")),
                                                                   "string")}
                if variable.get("label") and str(variable["label"]) != name:
                    schema["description"] = str(variable["label"])
                if variable.get("options"):
                    schema["enum"] = [str(option) for option in variable["options"]]
                if variable.get("max_length") and schema["type"] == "string":
                    schema["maxLength"] = int(variable["max_length"])
                if not variable.get("required", True):
                    schema["default"] = variable["default"] if variable.get("default") not in \
                        (None, "", []) else None if schema["type"] != "string" else ""
                inputs[name] = schema
        if chat or "query" in refs.sys_used:
            inputs.setdefault("query", {"type": "string", "description": "The chat message"})
        if chat or "conversation_id" in refs.sys_used:
            inputs.setdefault("conversation", {"type": "string", "default": "default",
                                               "description": "The conversation (its history "
                                                              "is kept per user)"})
        for name in sorted(refs.bare - set(inputs)):
            inputs[name] = {"type": "string", "default": ""}
            report.notes.append(f"{{{{{name}}}}} in a prompt reads the run input '{name}'")
        for name in sorted(refs.sys_used - {"query", "conversation_id", "user_id"}):
            inputs.setdefault(name if name != "files" else "files",
                              {"type": "array" if name == "files" else "string",
                               "default": [] if name == "files" else ""})
        return inputs


def _kind(data: dict, chat: bool) -> str:
    kind = data.get("type")
    if kind == "llm":
        return "agent" if chat and data.get("memory") else "llm"
    return {"agent": "agent", "knowledge-retrieval": "knowledge", "http-request": "http",
            "question-classifier": "router", "parameter-extractor": "llm"}.get(str(kind), "")


def _read_nodes(data: dict) -> list[str]:
    groups = (data.get("advanced_settings") or {}).get("groups") or []
    selectors = data.get("variables") or [s for g in groups for s in g.get("variables") or []]
    return [str(s[0]) for s in selectors if isinstance(s, list) and s]


def _slug(name: str) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")
    return text if text[:1].isalpha() else f"dify-{text}".strip("-")


FORMAT = DifyFormat()
