"""A flowforge document as a Dify DSL app (`flowforge export --format dify`).

The inverse of dify.py: a document whose blocks all have Dify counterparts
becomes `{kind: app, version, app: {mode, name, description}, workflow:
{graph: {nodes, edges}, environment_variables, conversation_variables}}`,
written so that importing it gives the same document back (the tests check
import -> export -> import on every corpus file that imports fully).

| flowforge | Dify |
| --- | --- |
| `inputs` (and an `input` block) | the start node's variables; the chat message, the conversation and the files are `sys.*` |
| `variables`, `memory` | environment and conversation variables |
| llm | llm (an extractor-shaped one: parameter-extractor) |
| agent | llm with memory in a chatflow, else the agent node (function calling) |
| template, code, knowledge, http | template-transform, code, knowledge-retrieval, http-request |
| condition, router | if-else, question-classifier |
| parallel `X_each` + set `X` | iteration `X` (the shape the import gives) |
| set | variable-aggregator (`output: {expr: a or b}`), else assigner of conversation variables |
| web_search | the Tavily search tool |
| response | answer (a message), end (`data`) |

Edges: one per `after:` entry (a condition's or router's edge leaves from the
case or class that goes there), and one from the start (or the iteration's
start) to a block without one.  Positions come from `metadata.layout`.
Anything else (a block type, a setting, a reference with no Dify spelling)
refuses the export with the whole list: nothing is dropped silently.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from flowforge.formats.base import ExportRefused
from flowforge.formats.dify_export_nodes import WRITERS, Writer, gathered
from flowforge.formats.dify_export_refs import Paths
from flowforge.workflow.templates import normalize_name

__all__ = ["export_dify"]

_DOC_KEYS = {"version", "id", "name", "description", "inputs", "variables", "memory",
             "blocks", "metadata"}
_BLOCK_KEYS = {"id", "type", "name", "description", "with", "after"}
_QUERY = {"type": "string", "description": "The chat message"}
_CONVERSATION = {"type": "string", "default": "default",
                 "description": "The conversation (its history is kept per user)"}
_FILES = {"type": "array", "default": []}
_SYS_FIELDS = {"dialogue_count", "app_id", "workflow_id", "workflow_run_id"}
_SCHEMA_KEYS = {"type", "description", "enum", "maxLength", "default"}
_INSTEAD = {
    "loop": "use a parallel block over the items (Dify's iteration)",
    "evaluator": "use an llm block with an output schema",
    "function": "use an inline code block",
    "workflow": "inline the nested workflow's blocks",
    "unsupported": "it had no flowforge counterpart when imported either",
}
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMESPACE = uuid.UUID("6f1c1f0e-5d1e-4c55-9a8e-2f4b9e3c1d01")


def _written(mapping: dict[str, Any]) -> set[str]:
    """The keys set to something: a loaded document also holds every default
    (`concurrency: 32`, `env: {}`, `on_error: null`), which asks nothing of Dify."""
    return {key for key, value in mapping.items() if value not in (None, {}, [], "")
            and not (key == "concurrency" and value == 32)}


def export_dify(document: dict[str, Any]) -> dict[str, Any]:
    """The Dify DSL app of a flowforge document (plain data), or ExportRefused
    listing every block and setting that has no Dify counterpart."""
    return _Export(document).run()


class _Export:
    def __init__(self, document: dict[str, Any]) -> None:
        self.doc = document
        self.meta = document.get("metadata") or {}
        self.layout = self.meta.get("layout") or {}
        self.types: dict[str, str] = {}
        self.names: dict[str, str] = {}
        self._walk(document.get("blocks") or [])
        inputs_blocks = [b for b in document.get("blocks") or [] if b.get("type") == "input"]
        taken = set(self.types) | set(self.names)
        self.start_id = inputs_blocks[0]["id"] if inputs_blocks else \
            next(name for name in ("start", "start_node", "dify_start") if name not in taken)
        self.chat = self._chat()
        self.paths = Paths(self.start_id, self.types, names=self.names)
        self.writer = Writer(self.paths, self.chat, set(document.get("memory") or []))
        self.nodes: list[dict] = []
        self.edges: list[dict] = []

    def _walk(self, blocks: list[dict]) -> None:
        for block in blocks:
            self.types[str(block.get("id"))] = str(block.get("type"))
            if block.get("name"):
                self.names.setdefault(normalize_name(str(block["name"])), str(block.get("id")))
            self._walk(block.get("blocks") or [])

    def _chat(self) -> bool:
        imported = self.meta.get("imported_from") or {}
        if imported.get("format") == "dify" and imported.get("mode"):
            return imported["mode"] in ("advanced-chat", "chat", "agent-chat")
        inputs = self.doc.get("inputs") or {}
        return inputs.get("conversation") == _CONVERSATION or any(
            kind == "response" and "data" not in (block.get("with") or {})
            for kind, block in self._all(self.doc.get("blocks") or []))

    def _all(self, blocks: list[dict]) -> list[tuple[str, dict]]:
        out = []
        for block in blocks:
            out.append((str(block.get("type")), block))
            out += self._all(block.get("blocks") or [])
        return out

    def run(self) -> dict[str, Any]:
        problem = self.paths.problem
        for key in sorted(_written(self.doc) - _DOC_KEYS):
            problem(f"the document's `{key}` has no place in a Dify app")
        for key in sorted(set(self.meta) - {"layout", "imported_from"}):
            problem(f"metadata.{key} has no place in a Dify app")
        start = self._start()
        self._scope(self.doc.get("blocks") or [], None, self.start_id)
        if self.paths.problems:
            raise ExportRefused("Dify", self.paths.problems)
        imported = self.meta.get("imported_from") or {}
        mode = imported.get("mode") if imported.get("format") == "dify" and \
            imported.get("mode") else ("advanced-chat" if self.chat else "workflow")
        return {
            "app": {"description": self.doc.get("description") or "", "icon": "🤖",
                    "icon_background": "#FFEAD5", "mode": mode,
                    "name": self.doc.get("name") or self.doc.get("id") or "flowforge",
                    "use_icon_as_answer_icon": False},
            "kind": "app",
            "version": str(imported.get("version") or "0.1.5")
            if imported.get("format") == "dify" else "0.1.5",
            "workflow": {
                "conversation_variables": [
                    {"id": str(uuid.uuid5(_NAMESPACE, f"conversation.{name}")), "name": name,
                     "value_type": "string", "value": "", "description": ""}
                    for name in self.doc.get("memory") or []],
                "environment_variables": self._environment(),
                "features": {"file_upload": {"enabled": False}, "opening_statement": "",
                             "retriever_resource": {"enabled": False},
                             "sensitive_word_avoidance": {"enabled": False},
                             "speech_to_text": {"enabled": False}, "suggested_questions": [],
                             "suggested_questions_after_answer": {"enabled": False},
                             "text_to_speech": {"enabled": False}},
                "graph": {"edges": self.edges, "nodes": [start, *self.nodes],
                          "viewport": {"x": 0, "y": 0, "zoom": 1}}}}

    def _environment(self) -> list[dict]:
        out = []
        for name, value in (self.doc.get("variables") or {}).items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                self.paths.problem(f"variables.{name}: Dify's environment variables are text "
                                   f"or numbers")
                continue
            out.append({"id": str(uuid.uuid5(_NAMESPACE, f"env.{name}")), "name": name,
                        "value": value, "description": "",
                        "value_type": "string" if isinstance(value, str) else "number"})
        return out

    def _start(self) -> dict:
        """The start node: one variable per input, but for those Dify keeps in `sys`."""
        variables = []
        for name, schema in (self.doc.get("inputs") or {}).items():
            if name == "conversation" and schema == _CONVERSATION:
                self.paths.sys_inputs[name] = "conversation_id"
                continue
            if name == "files" and schema == _FILES:
                self.paths.sys_inputs[name] = "files"
                continue
            if name in _SYS_FIELDS and schema == {"type": "string", "default": ""}:
                self.paths.sys_inputs[name] = name          # Dify fills it in: sys.<name>
                continue
            if name == "query" and schema == _QUERY and self.chat:
                self.paths.sys_inputs[name] = "query"
                continue
            variables.append(self._variable(name, schema or {}))
        position = self.layout.get(self.start_id) or {"x": 30, "y": 280}
        return self._node(self.start_id, {"type": "start", "title": "Start", "desc": "",
                                          "variables": variables}, position)

    def _variable(self, name: str, schema: dict) -> dict:
        for key in sorted(set(schema) - _SCHEMA_KEYS):
            self.paths.problem(f"inputs.{name}.{key} has no place on Dify's start variables")
        kind = schema.get("type", "string")
        dify = {"number": "number", "object": "file", "array": "file-list"}.get(kind)
        if kind == "string":
            dify = "select" if schema.get("enum") else \
                "text-input" if schema.get("maxLength") else "paragraph"
        if dify is None:
            self.paths.problem(f"inputs.{name}: Dify's start variables are text, numbers, "
                               f"options or files, not {kind}")
        variable: dict[str, Any] = {"variable": name, "label": schema.get("description") or name,
                                    "type": dify or "text-input",
                                    "required": "default" not in schema,
                                    "options": [str(o) for o in schema.get("enum") or []]}
        if schema.get("maxLength"):
            variable["max_length"] = schema["maxLength"]
        if schema.get("default") not in (None, "", []):
            variable["default"] = schema["default"]
        return variable

    def _node(self, node_id: str, data: dict, position: Any,
              parent: str | None = None) -> dict:
        place = {"x": position.get("x", 0), "y": position.get("y", 0)} \
            if isinstance(position, dict) else {"x": 0, "y": 0}
        node = {"id": node_id, "type": "custom", "data": data, "position": place,
                "positionAbsolute": dict(place), "height": 90, "width": 244,
                "sourcePosition": "right", "targetPosition": "left", "selected": False}
        if parent:
            data.update(isInIteration=True, iteration_id=parent)
            node.update(parentId=parent, extent="parent", zIndex=1001)
        return node

    def _scope(self, blocks: list[dict], parent: str | None, entry: str) -> None:
        """The nodes and edges of one level (the document, or an iteration)."""
        by_id = {str(b.get("id")): b for b in blocks}
        consumed: set[str] = set()
        pairs: dict[str, dict] = {}
        for block in blocks:
            block_id = str(block.get("id"))
            head = by_id.get(block_id[:-5]) if block_id.endswith("_each") else None
            if block.get("type") == "parallel" and head and head.get("type") == "set":
                pairs[block_id[:-5]] = block
                consumed.add(block_id)
        jinja_of = {str(b.get("id")): self._jinja(b, by_id, consumed) for b in blocks
                    if b.get("type") in ("llm", "agent")}
        written: list[tuple[dict, list[str]]] = []
        for index, block in enumerate(blocks):
            block_id = str(block.get("id"))
            if block_id in consumed or (parent is None and block.get("type") == "input"):
                continue
            self.paths.block = block_id
            if not _ID.fullmatch(block_id):
                self.paths.problem("Dify node ids come back as letters, digits and `_`: "
                                   "rename the block")
            data, preds = self._data(block, pairs, jinja_of)
            if data is None:
                continue
            data.update(title=str(block.get("name") or block_id),
                        desc=str(block.get("description") or ""), selected=False)
            position = self.layout.get(block_id) or {"x": 380 + 320 * index, "y": 280}
            self.nodes.append(self._node(block_id, data, position, parent))
            written.append((block, preds))
            if block_id in pairs:
                self._iteration(block_id, pairs[block_id])
        self.paths.block = ""
        names = {str(b.get("id")) for b, _ in written}
        for block, preds in written:
            target = str(block.get("id"))
            sources = [p for p in preds if p not in consumed]
            for source in sources:
                if source not in names:
                    self.paths.problem(f"{target}: `after: {source}` crosses an iteration's "
                                       f"edge; Dify draws edges within one level")
                    continue
                for handle in self.writer.handles.pop((source, target), ["source"]):
                    self._edge(source, handle, target, parent)
            if not sources:
                self._edge(entry, "source", target, parent)
        for (source, target), handles in list(self.writer.handles.items()):
            if source in names and target in names:           # a route without `after:`
                for handle in handles:
                    self._edge(source, handle, target, parent)
                del self.writer.handles[(source, target)]

    def _data(self, block: dict, pairs: dict[str, dict],
              jinja_of: dict[str, dict]) -> tuple[dict | None, list[str]]:
        """A block's Dify node data and the blocks its edges come from."""
        kind, block_id = str(block.get("type")), str(block.get("id"))
        for key in sorted(_written(block) - _BLOCK_KEYS - ({"blocks"} if kind == "parallel"
                                                           else set())):
            self.paths.problem(f"`{key}` has no Dify counterpart")
        after = block.get("after") or []
        preds = [str(a) for a in (after if isinstance(after, list) else
                                  [*(after.get("any") or []), *(after.get("all") or [])])]
        if isinstance(after, dict) and after.get("all") and (after.get("any") or
                                                              len(after["all"]) > 1):
            self.paths.problem("`after: {all: [...]}`: Dify joins its incoming edges as "
                               "alternatives (write `after: {any: [...]}`)")
        if block_id in pairs:
            return self._iteration_data(block, pairs[block_id]), \
                [p for p in preds if p != f"{block_id}_each"] + \
                [str(p) for p in pairs[block_id].get("after") or []]
        writer = WRITERS.get(kind)
        if writer is None:
            hint = _INSTEAD.get(kind, "replace it with a block Dify has (llm, code, http, ...)")
            self.paths.problem(f"the `{kind}` block type has no Dify counterpart: {hint}")
            return None, preds
        if kind == "parallel":
            return None, preds
        if kind in ("llm", "agent"):
            return writer(block, self.writer, jinja_of.get(block_id)), preds
        return writer(block, self.writer), preds

    def _jinja(self, block: dict, by_id: dict[str, dict], consumed: set[str]) -> dict[str, dict]:
        """The template blocks the import made of an llm's Jinja2 messages
        (`<id>_prompt<n>`), by the reference that reads them, folded back."""
        with_ = block.get("with") or {}
        title = str(block.get("name") or block.get("id"))
        roles = ["system"] + (["prompt"] if block.get("type") == "llm" else [])
        found: dict[str, dict] = {}
        index = 0
        for role in roles:
            text = with_.get(role)
            if not text:
                continue
            template_id = f"{block.get('id')}_prompt{index}"
            template = by_id.get(template_id)
            index += 1
            if text != "{{" + template_id + ".output}}" or template is None or \
                    template.get("type") != "template" or set(template) - \
                    {"id", "type", "name", "with"} or template.get("name") != \
                    f"{title} prompt {index - 1}" or set(template.get("with") or {}) - \
                    {"template", "variables"}:
                continue
            if found and next(iter(found.values()))["with"].get("variables") != \
                    template["with"].get("variables"):
                continue
            found[text] = template
            consumed.add(template_id)
        return found

    def _iteration_data(self, head: dict, each: dict) -> dict:
        block_id = str(head.get("id"))
        title = str(head.get("name") or block_id)
        with_ = each.get("with") or {}
        if each.get("name") not in (None, f"{title} (items)"):
            self.paths.problem(f"{each.get('id')}: its name comes back as '{title} (items)'")
        for key in sorted(set(each) - {"id", "type", "name", "with", "blocks", "after"}):
            self.paths.problem(f"{each.get('id')}: `{key}` has no place on Dify's iteration")
        for key in sorted(set(with_) - {"for_each", "max_concurrency"}):
            self.paths.problem(f"{each.get('id')}: `{key}` has no place on Dify's iteration")
        output: list[str] = []
        read = gathered(head)
        if read is not None:
            self.paths.iteration = block_id
            output = self.paths.selector(f"{read[0]}.{read[1]}") or []
            self.paths.iteration = None
        elif (head.get("with") or {}) != {"output": None}:
            self.paths.problem("an iteration's set gathers one child's field: "
                               "`output: {expr: \"pluck(pluck(<id>_each.results, 'child'), "
                               "'field')\"}`")
        concurrency = int(with_.get("max_concurrency") or 10)
        return {"type": "iteration", "start_node_id": f"{block_id}start",
                "iterator_selector": self.paths.whole(with_.get("for_each"), "for_each"),
                "output_selector": output, "output_type": "array[string]",
                "is_parallel": concurrency != 1, "parallel_nums": concurrency,
                "error_handle_mode": "terminated"}

    def _iteration(self, block_id: str, each: dict) -> None:
        """An iteration's own start node and its children, inside it."""
        start = f"{block_id}start"
        node = self._node(start, {"type": "iteration-start", "title": "", "desc": "",
                                  "selected": False}, {"x": 24, "y": 68}, block_id)
        node.update(type="custom-iteration-start", draggable=False, selectable=False)
        self.nodes.append(node)
        outer = self.paths.iteration
        self.paths.iteration = block_id
        self._scope(each.get("blocks") or [], block_id, start)
        self.paths.iteration = outer

    def _edge(self, source: str, handle: str, target: str, parent: str | None) -> None:
        data: dict[str, Any] = {"isInIteration": parent is not None}
        if parent:
            data["iteration_id"] = parent
        self.edges.append({"id": f"{source}-{handle}-{target}-target", "source": source,
                           "sourceHandle": handle, "target": target, "targetHandle": "target",
                           "type": "custom", "data": data})
