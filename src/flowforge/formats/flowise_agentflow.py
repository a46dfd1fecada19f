"""Flowise agentflows (v2): each step node becomes a block (`convert`).

Start -> `input` (chat message `query`, or one input per form field), LLM
-> `llm` (structured output as `output_schema`), Agent -> `agent`,
Condition -> `condition`, HTTP -> `http`, Direct Reply -> `response`.
Messages are HTML: their text is kept and the editor's mentions
(`{{ question }}`, `{{ llmAgentflow_0 }}`, `{{ $form.name }}`) become
references; a mention with no counterpart (`$flow.state`) is reported.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.formats._flowgraph import Builder, slug
from flowforge.formats._flowparts import GENERIC_INSTEAD, SEARCH_TOOLS, calculator_tool, \
    html_text, search_tool
from flowforge.formats.flowise import Graph, parse_list
from flowforge.formats.flowise_nodes import model_settings

__all__ = ["convert"]

_MENTION = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
_TYPES = {"string": "string", "number": "number", "boolean": "boolean",
          "jsonArray": "array", "enum": "string"}


def _text(g: Graph, node_id: str, value: Any, b: Builder) -> str:
    """HTML message text with mentions as flowforge references."""
    def mention(match: re.Match) -> str:
        name = match.group(1).strip()
        if name in ("question", "$flow.input"):
            return "{{input.query}}"
        if name.startswith("$form."):
            return "{{input." + name[len("$form."):] + "}}"
        if name.split(".")[0] in g.refs:
            return "{{" + g.refs[name.split(".")[0]] + "}}"
        b.note(f"{g.title[node_id]!r}: the mention {{{{ {name} }}}} has no flowforge "
               f"counterpart; rewrite it as a reference ({{{{block.field}}}})")
        return f"[Flowise mention not converted: {name}]"
    return _MENTION.sub(mention, html_text(value))


def _add(g: Graph, node_id: str, b: Builder, type_: str, with_: dict[str, Any],
         dropped: list[str] | None = None, after: list[str] | None = None) -> None:
    b.add({"id": g.ids[node_id], "type": type_, "name": g.title[node_id],
           "description": g.description(node_id),
           "after": g.after(node_id) if after is None else after, "with": with_},
          g.position(node_id))
    b.node(g.ids[node_id], g.title[node_id], g.kind[node_id], type_, dropped=dropped)
    g.blocked.add(node_id)


def _start(g: Graph, node_id: str, b: Builder) -> None:
    if g.input(node_id, "startInputType", "chatInput") == "formInput":
        for field in parse_list(g.input(node_id, "formInputTypes", [])) or []:
            if isinstance(field, dict) and field.get("name"):
                b.inputs[str(field["name"])] = {
                    "type": "number" if field.get("type") == "number" else "string",
                    "description": str(field.get("label") or field["name"])}
    else:
        b.inputs["query"] = {"type": "string",
                             "description": "The chat message (Flowise's question)"}
    dropped = ["startState: flowforge blocks pass values by reference, not a shared state"] \
        if g.input(node_id, "startState") else []
    _add(g, node_id, b, "input", {}, dropped)
    g.refs[node_id] = "input"


def _messages(g: Graph, node_id: str, prefix: str, b: Builder, with_: dict[str, Any]) -> None:
    system, prompt = [], []
    for message in parse_list(g.input(node_id, f"{prefix}Messages", [])) or []:
        if isinstance(message, dict):
            text = _text(g, node_id, message.get("content"), b)
            (system if message.get("role") in ("system", "developer") else prompt).append(text)
    user = g.input(node_id, f"{prefix}UserMessage")
    if user:
        prompt.append(_text(g, node_id, user, b))
    text = "\n\n".join(prompt) or "{{input.query}}"
    with_["prompt"] = "{prompt}"
    with_["inputs"] = {"prompt": text}
    if system:
        with_["system"] = "\n\n".join(system)


def _model(g: Graph, node_id: str, prefix: str, with_: dict[str, Any]) -> list[str]:
    config = parse_list(g.input(node_id, f"{prefix}ModelConfig", {})) or {}
    settings, dropped = model_settings(str(g.input(node_id, f"{prefix}Model", "")),
                                       config if isinstance(config, dict) else {})
    with_.update(settings)
    return dropped


def _memory(g: Graph, node_id: str, prefix: str, b: Builder, with_: dict[str, Any]) -> bool:
    if g.input(node_id, f"{prefix}EnableMemory") not in (True, "true", "True"):
        return False
    b.inputs.setdefault("session_id", {"type": "string", "default": "default",
                                       "description": "The conversation's id"})
    with_["conversation"] = "{{input.session_id}}"
    return True


def _llm(g: Graph, node_id: str, b: Builder) -> None:
    with_: dict[str, Any] = {}
    _messages(g, node_id, "llm", b, with_)
    dropped = _model(g, node_id, "llm", with_)
    properties = {}
    for row in parse_list(g.input(node_id, "llmStructuredOutput", [])) or []:
        if not isinstance(row, dict) or not row.get("key"):
            continue
        schema: dict[str, Any] = {"type": _TYPES.get(row.get("type"), "string")}
        if row.get("description"):
            schema["description"] = row["description"]
        if row.get("type") == "enum" and row.get("enumValues"):
            schema["enum"] = [v.strip() for v in str(row["enumValues"]).split(",")]
        if row.get("type") == "jsonArray":
            try:
                fields = json.loads(row.get("jsonSchema") or "{}")
                schema["items"] = {"type": "object", "properties": fields}
            except ValueError:
                dropped.append(f"{row['key']}: its JSON schema is not valid JSON")
        properties[str(row["key"])] = schema
    if properties:
        with_["output_schema"] = {"type": "object", "properties": properties,
                                  "required": list(properties)}
    type_ = "agent" if _memory(g, node_id, "llm", b, with_) else "llm"
    if type_ == "agent":
        with_["prompt"] = with_.pop("inputs")["prompt"]
        if "output_schema" in with_:
            with_["response_format"] = with_.pop("output_schema")
    if g.input(node_id, "llmUpdateState"):
        dropped.append("llmUpdateState: later blocks read this block's output by reference")
    _add(g, node_id, b, type_, with_, dropped)
    g.refs[node_id] = g.ids[node_id] if properties else f"{g.ids[node_id]}.content"


def _agent(g: Graph, node_id: str, b: Builder) -> None:
    with_: dict[str, Any] = {}
    _messages(g, node_id, "agent", b, with_)
    with_["prompt"] = with_.pop("inputs")["prompt"]
    dropped = _model(g, node_id, "agent", with_)
    tools = []
    for row in parse_list(g.input(node_id, "agentTools", [])) or []:
        kind = str((row or {}).get("agentSelectedTool") or "")
        if kind.lower() in SEARCH_TOOLS:
            entry, more = search_tool(kind)
            tools.append(entry)
            dropped += more
        elif kind == "calculator":
            tools.append(calculator_tool())
        else:
            b.note(f"{g.title[node_id]!r}: its tool {kind!r} has no flowforge counterpart; "
                   f"{GENERIC_INSTEAD}, then list it in the agent's `tools:`")
            dropped.append(f"tool {kind!r}: no counterpart")
    for store in parse_list(g.input(node_id, "agentKnowledgeDocumentStores", [])) or []:
        name = slug(str((store or {}).get("documentStore") or "documents").split(":")[-1])
        b.knowledge_base(name)
        tools.append({"knowledge_search": {"knowledge_base": name}})
    if tools:
        with_["tools"] = tools
    _memory(g, node_id, "agent", b, with_)
    _add(g, node_id, b, "agent", with_, dropped)
    g.refs[node_id] = f"{g.ids[node_id]}.content"


_OPERATIONS = {"equal": "{a} == {b}", "notEqual": "{a} != {b}", "contains": "{b} in {a}",
               "notContains": "{b} not in {a}", "startsWith": "{a}.startswith({b})",
               "endsWith": "{a}.endswith({b})", "larger": "{a} > {b}",
               "largerEqual": "{a} >= {b}", "smaller": "{a} < {b}",
               "smallerEqual": "{a} <= {b}", "isEmpty": "not {a}", "notEmpty": "{a}"}


def _operand(g: Graph, node_id: str, value: Any, number: bool, b: Builder) -> str:
    text = _text(g, node_id, value, b) if isinstance(value, str) else value
    if isinstance(text, str) and re.fullmatch(r"\{\{[\w.]+\}\}", text):
        path = text[2:-2]
        return f"float({path})" if number else f"str({path})"
    return json.dumps(text if not number else float(text or 0))


def _condition(g: Graph, node_id: str, b: Builder) -> None:
    rows = parse_list(g.input(node_id, "conditions", [])) or []
    targets: dict[int, list[str]] = {}
    for target, output in g.outs[node_id]:
        if output is not None and output.isdigit():
            targets.setdefault(int(output), []).append(g.ids[target])
    cases, dropped = [], []
    for index, row in enumerate(rows):
        operation = (row or {}).get("operation", "equal")
        numeric = (row or {}).get("type") == "number"
        if operation not in _OPERATIONS or index not in targets:
            dropped.append(f"condition {index}: {operation!r} has no expression counterpart")
            continue
        cases.append({"when": _OPERATIONS[operation].format(
            a=_operand(g, node_id, row.get("value1"), numeric, b),
            b=_operand(g, node_id, row.get("value2"), numeric, b)),
            "goto": targets[index][0]})
    with_: dict[str, Any] = {"cases": cases}
    if len(rows) in targets:
        with_["default"] = targets[len(rows)][0]
    _add(g, node_id, b, "condition", with_, dropped)
    g.refs[node_id] = g.ids[node_id]


def _reply(g: Graph, node_id: str, b: Builder) -> None:
    _add(g, node_id, b, "response",
         {"message": _text(g, node_id, g.input(node_id, "directReplyMessage", ""), b)})
    g.refs[node_id] = f"{g.ids[node_id]}.message"


def _http(g: Graph, node_id: str, b: Builder) -> None:
    with_: dict[str, Any] = {"url": _text(g, node_id, g.input(node_id, "url", ""), b),
                             "method": str(g.input(node_id, "method", "GET")).upper()}
    headers = {str(row.get("key")): _text(g, node_id, row.get("value", ""), b)
               for row in parse_list(g.input(node_id, "headers", [])) or []
               if isinstance(row, dict) and row.get("key")}
    if headers:
        with_["headers"] = headers
    if g.input(node_id, "body"):
        with_["body"] = _text(g, node_id, g.input(node_id, "body"), b)
    dropped = ["credential: put the key in `headers` as `{{secrets.NAME}}`"] \
        if g.input(node_id, "httpCredential") else []
    _add(g, node_id, b, "http", with_, dropped)
    g.refs[node_id] = f"{g.ids[node_id]}.data"


_HANDLERS = {"startAgentflow": _start, "llmAgentflow": _llm, "agentAgentflow": _agent,
             "conditionAgentflow": _condition, "directReplyAgentflow": _reply,
             "httpAgentflow": _http}
_INSTEAD = {
    "customFunctionAgentflow": "rewrite its JavaScript as an inline Python `code` block",
    "humanInputAgentflow": "use an `approval` block",
    "iterationAgentflow": "use a `parallel` block over the list, its steps as child blocks",
    "loopAgentflow": "use a `loop` block around the steps it repeats",
    "executeFlowAgentflow": "import that flow too and call it with a `workflow` block",
    "retrieverAgentflow": "load the documents into a knowledge base (`flowforge kb add`) and "
                          "search it with a `knowledge` block",
    "conditionAgentAgentflow": "use a `router` block whose prompt lists the scenarios",
}


def convert(g: Graph, b: Builder) -> None:
    for node_id in g.order():
        handler = _HANDLERS.get(g.kind[node_id])
        if handler is not None:
            handler(g, node_id, b)
            continue
        b.unsupported(g.ids[node_id], g.title[node_id], g.kind[node_id],
                      _INSTEAD.get(g.kind[node_id], GENERIC_INSTEAD), g.position(node_id),
                      after=g.after(node_id), description=g.description(node_id))
        g.blocked.add(node_id)
        g.refs[node_id] = g.ids[node_id]
