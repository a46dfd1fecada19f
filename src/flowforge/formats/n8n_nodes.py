"""The n8n node table: what each node type becomes (`convert_node`).

Each handler writes one block (and folds the node's AI sub-nodes into it)
and records the node's `View`: how later `$json.<field>` reads of its output
map onto the block's outputs.  Anything without a counterpart becomes an
`unsupported` block saying what to use instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from flowforge.formats._flowgraph import Builder, slug
from flowforge.formats.n8n_conditions import ConditionError, conditions_expression
from flowforge.formats import n8n_ai

__all__ = ["View", "convert_node", "orphan_sub_node", "is_trigger", "short"]


@dataclass
class View:
    """How an n8n `$json.<path>` read of a node's output maps onto its block:
    `fields` (n8n path prefix -> flowforge path), `open` (any path under this
    flowforge path), `passes` (the node hands its input on: ask its inputs)."""

    fields: dict[str, str] = field(default_factory=dict)
    open: str | None = None
    passes: bool = False


_INPUT_TRIGGERS = {"chatTrigger", "manualChatTrigger", "manualTrigger", "formTrigger", "webhook",
                   "executeWorkflowTrigger", "scheduleTrigger", "start", "n8nTrigger"}

SAAS_INSTEAD = ("call the service's HTTP API with an `http` block (its key as "
                "`{{secrets.NAME}}` in a header), or register a Python function "
                "(@flowforge.function) and call it from a `function` block")
FILE_INSTEAD = "register a Python function that reads or writes the file and call it from a " \
               "`function` block"
DB_INSTEAD = "register a Python function that runs the query and call it from a `function` block"
_FILES = {"readWriteFile", "readBinaryFile", "writeBinaryFile", "readBinaryFiles",
          "extractFromFile", "convertToFile", "localFileTrigger", "compression", "ftp", "ssh",
          "executeCommand", "editImage"}
_DATABASES = {"mySql", "postgres", "mongoDb", "redis", "microsoftSql", "supabase", "snowflake",
              "sqlite", "oracleDatabase", "dataTable"}


def short(node: dict[str, Any]) -> str:
    return node["type"].rsplit(".", 1)[-1]


def is_trigger(node: dict[str, Any]) -> bool:
    return short(node) in _INPUT_TRIGGERS or short(node).endswith("Trigger")


def after_of(flow: Any, name: str) -> list[str] | dict[str, list[str]]:
    ids = list(dict.fromkeys(flow.routes.get((origin, output), flow.ids[origin])
                             for origin, output in flow.main_in[name] if origin in flow.ids))
    return ids


def base(flow: Any, name: str, type_: str, with_: dict[str, Any], **more: Any) -> dict[str, Any]:
    node = flow.nodes[name]
    block = {"id": flow.ids[name], "type": type_, "name": name,
             "description": node.get("notes") or None, "after": after_of(flow, name),
             "with": with_}
    block.update(more)
    return block


def convert_node(flow: Any, name: str, b: Builder) -> None:
    node = flow.nodes[name]
    kind = short(node)
    params = node.get("parameters") or {}
    handler = _HANDLERS.get(kind)
    if handler is None and (node["type"].startswith("@n8n/n8n-nodes-langchain.")
                            or kind == "openAi"):
        handler = n8n_ai.HANDLERS.get(kind)
    if handler is None:
        unsupported(flow, name, b, instead_for(node))
        return
    handler(flow, name, params, b)


def instead_for(node: dict[str, Any]) -> str:
    kind = short(node)
    if kind in _FILES:
        return FILE_INSTEAD
    if kind in _DATABASES or kind.removesuffix("Tool") in _DATABASES:
        return DB_INSTEAD
    if kind == "code" or kind == "function" or kind == "functionItem":
        language = (node.get("parameters") or {}).get("language", "javaScript")
        if str(language).startswith("python"):
            return ("port it to an inline Python `code` block (n8n's `_input` and `_json` "
                    "helpers do not exist there) or a registered function")
        return ("rewrite the JavaScript as an inline Python `code` block or a registered "
                "function (flowforge runs Python, not JavaScript)")
    if kind.startswith("vectorStore"):
        return ("load the documents into a flowforge knowledge base (`flowforge kb add`) and "
                "search it with a `knowledge` block")
    if kind in ("html", "xml", "markdown", "crypto", "dateTime", "removeDuplicates",
                "itemLists", "sort", "splitInBatches", "wait", "stopAndError", "summarize"):
        return ("no built-in counterpart: a `set` block with expressions, an inline `code` "
                "block or a registered function does it")
    return SAAS_INSTEAD


def unsupported(flow: Any, name: str, b: Builder, instead: str) -> None:
    node = flow.nodes[name]
    b.unsupported(flow.ids[name], name, node["type"], instead, node.get("position"),
                  after=after_of(flow, name), description=node.get("notes") or None)
    flow.views[name] = View(open=flow.ids[name])


def orphan_sub_node(flow: Any, name: str, parent: str, b: Builder) -> None:
    node = flow.nodes[name]
    b.unsupported(flow.ids[name], name, node["type"],
                  f"it serves {parent!r}, which has no counterpart; {instead_for(node)}",
                  node.get("position"))


# -- triggers ---------------------------------------------------------------

def _trigger(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    node = flow.nodes[name]
    kind = short(node)
    dropped: list[str] = []
    if kind in ("chatTrigger", "manualChatTrigger"):
        b.inputs.setdefault("chatInput", {"type": "string", "description": "The chat message"})
        b.inputs.setdefault("sessionId", {"type": "string", "default": "default",
                                          "description": "The conversation's id"})
    elif kind == "formTrigger":
        for entry in (params.get("formFields") or {}).get("values") or []:
            label = str(entry.get("fieldLabel") or "field")
            key = slug(label, "field")
            flow.input_keys[label] = key
            schema: dict[str, Any] = {"type": "number" if entry.get("fieldType") == "number"
                                      else "string", "description": label}
            if not entry.get("requiredField"):
                schema["default"] = ""
            b.inputs.setdefault(key, schema)
    elif kind == "webhook":
        for key in ("body", "query", "headers"):
            b.inputs.setdefault(key, {"type": "object", "default": {},
                                      "description": f"The request's {key}"})
        dropped.append("path, method and authentication: a flowforge server runs the "
                       "document through its own run route and tokens")
    elif kind == "executeWorkflowTrigger":
        for entry in (params.get("workflowInputs") or {}).get("values") or []:
            if entry.get("name"):
                b.inputs.setdefault(entry["name"], {"type": entry.get("type") or "string"})
    elif kind == "scheduleTrigger":
        dropped.append("schedule: write it as `triggers: [{cron: ...}]` in the document")
    b.add(base(flow, name, "input", {}), node.get("position"))
    b.node(flow.ids[name], name, node["type"], "input", dropped=dropped)
    flow.views[name] = View(open="input")


# -- data shaping -------------------------------------------------------------

def _typed(value: Any, kind: str | None) -> Any:
    if isinstance(value, str) and not value.startswith("=") or \
            isinstance(value, str) and "{{" not in value:
        text = value[1:] if value.startswith("=") else value
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind == "number":
            try:
                return float(text) if "." in text else int(text)
            except ValueError:
                return value
    return value


def set_fields(params: dict[str, Any]) -> list[tuple[str, Any, str | None]]:
    """A Set node's (name, value, type) whichever version wrote it."""
    found: list[tuple[str, Any, str | None]] = []
    for entry in (params.get("assignments") or {}).get("assignments") or []:
        found.append((entry.get("name"), entry.get("value"), entry.get("type")))
    for entry in (params.get("fields") or {}).get("values") or []:
        value_key = next((k for k in entry if k.endswith("Value")), None)
        found.append((entry.get("name"), entry.get(value_key) if value_key else None,
                      entry.get("type") or (value_key or "").removesuffix("Value") or None))
    values = params.get("values")
    if isinstance(values, dict):
        for kind, entries in values.items():
            for entry in entries or []:
                found.append((entry.get("name"), entry.get("value"), kind))
    return [item for item in found if isinstance(item[0], str) and item[0]]


def _set(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    node = flow.nodes[name]
    with_: dict[str, Any] = {}
    view = View()
    dropped: list[str] = []
    for field_name, value, kind in set_fields(params):
        key = field_name if field_name.isidentifier() else slug(field_name, "field")
        if key != field_name:
            dropped.append(f"field name {field_name!r}: written `{key}` (a reference needs "
                           f"a plain name)")
        with_[key] = _typed(flow.text(value, name, b), kind)
        view.fields[key] = f"{flow.ids[name]}.{key}"
    version = node.get("typeVersion") or 1
    options = params.get("options") or {}
    view.passes = not (params.get("keepOnlySet") or options.get("keepOnlySet")) and (
        version < 3 or params.get("includeOtherFields") or params.get("include") in
        ("all", "except", "selected"))
    b.add(base(flow, name, "set", with_), node.get("position"))
    b.node(flow.ids[name], name, node["type"], "set", dropped=dropped)
    flow.views[name] = view


def _pass(flow: Any, name: str, params: dict[str, Any], b: Builder, dropped: list[str],
          with_: dict[str, Any] | None = None, view: View | None = None) -> None:
    node = flow.nodes[name]
    block = base(flow, name, "set", with_ or {})
    if short(node) == "merge" and len(block["after"]) > 1:
        block["after"] = {"all": block["after"]}
    b.add(block, node.get("position"))
    b.node(flow.ids[name], name, node["type"], "set", dropped=dropped)
    flow.views[name] = view or View(passes=True)


def _no_op(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    _pass(flow, name, params, b, [])


def _merge(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    mode = params.get("mode", "append")
    _pass(flow, name, params, b, [f"mode {mode!r}: flowforge waits for every input and later "
                                  f"blocks read each input's fields by reference"])


def _limit(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    _pass(flow, name, params, b, [f"maxItems {params.get('maxItems', 1)}: flowforge runs a "
                                  f"block once, not once per item; cut the list in a `set` "
                                  f"block's expression where it matters"])


def _split_out(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    source = str(params.get("fieldToSplitOut") or "")
    reference = flow.reader(name)(None, source.split(".")) if source else None
    if reference is None:
        b.note(f"{name!r}: the field {source!r} it splits could not be mapped to a reference")
    items = "{{" + reference + "}}" if reference else f"[n8n field not mapped: {source}]"
    _pass(flow, name, params, b,
          ["per-item runs: n8n runs the nodes after it once per item; flowforge runs them "
           "once with the list (`items`): wrap them in a `parallel` block "
           f"(for_each: {{{{{flow.ids[name]}.items}}}}) for one run per item"],
          {"items": items}, View(fields={"items": f"{flow.ids[name]}.items"}))


def _aggregate(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    with_: dict[str, Any] = {}
    reader = flow.reader(name)
    if params.get("aggregate") == "aggregateAllItemData":
        origin = flow.input_of(name)
        key = params.get("destinationFieldName") or "data"
        with_[key] = "{{" + flow.ids[origin] + "}}" if origin in flow.ids else []
    for entry in (params.get("fieldsToAggregate") or {}).get("fieldToAggregate") or []:
        source = str(entry.get("fieldToAggregate") or "")
        key = entry.get("outputFieldName") if entry.get("renameField") else source
        key = slug(key or source, "field")
        reference = reader(None, source.split("."))
        with_[key] = "{{" + reference + "}}" if reference else f"[n8n field not mapped: {source}]"
    view = View(fields={key: f"{flow.ids[name]}.{key}" for key in with_})
    _pass(flow, name, params, b, ["collecting items: flowforge has one value per block, "
                                  "which the fields read as they are"], with_, view)


# -- routing --------------------------------------------------------------------

def branch(flow: Any, name: str, output: int, label: str, b: Builder,
           description: str | None = None, always: bool = False) -> str | None:
    """The block that stands for output `output` of a routing node: its one
    target, or (several targets, or `always`) a `set` junction they follow."""
    targets = flow.main_out[name].get(output, [])
    if not targets and not always:
        return None
    if len(targets) == 1 and not always:
        flow.routes[(name, output)] = flow.ids[name]
        return flow.ids[targets[0]]
    junction = flow.id_maker.make(f"{flow.ids[name]}_{label}")
    flow.routes[(name, output)] = junction
    b.add({"id": junction, "type": "set", "name": label, "description": description,
           "after": [flow.ids[name]], "with": {"branch": label}})
    return junction


def _condition(flow: Any, name: str, params: dict[str, Any], b: Builder,
               cases: list[tuple[int, str, str]], default: int | None) -> None:
    """`cases`: (output index, label, expression); `default`: the output taken
    when no case holds."""
    node = flow.nodes[name]
    written = []
    for output, label, expression in cases:
        goto = branch(flow, name, output, label, b)
        if goto is not None:
            written.append({"when": expression, "goto": goto})
    with_: dict[str, Any] = {"cases": written}
    if default is not None:
        target = branch(flow, name, default, "otherwise", b)
        if target is not None:
            with_["default"] = target
    b.add(base(flow, name, "condition", with_), node.get("position"))
    b.node(flow.ids[name], name, node["type"], "condition")
    flow.views[name] = View(passes=True)


def _if(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    _one_condition(flow, name, params, b, "true", 1)


def _filter(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    _one_condition(flow, name, params, b, "kept", None)


def _one_condition(flow: Any, name: str, params: dict[str, Any], b: Builder, label: str,
                   otherwise: int | None) -> None:
    """If and Filter: one expression, its outputs `label` (and `otherwise`'s index)."""
    try:
        expression = conditions_expression(params.get("conditions"), flow.reader(name),
                                           params.get("combineOperation"))
    except ConditionError as exc:
        unsupported(flow, name, b, f"its condition cannot be converted ({exc}); write it as "
                                   f"a `condition` block's expression")
        return
    _condition(flow, name, params, b, [(0, label, expression)], otherwise)


def _switch(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    reader = flow.reader(name)
    cases: list[tuple[int, str, str]] = []
    default: int | None = None
    try:
        if params.get("mode") == "expression":
            raise ConditionError("its output is chosen by a JavaScript expression")
        rules = params.get("rules") or {}
        if isinstance(rules.get("values"), list):                  # v3
            for index, rule in enumerate(rules["values"]):
                label = rule.get("outputKey") if rule.get("renameOutput") else f"output {index}"
                cases.append((index, str(label or f"output {index}"),
                              conditions_expression(rule.get("conditions"), reader)))
            fallback = (params.get("options") or {}).get("fallbackOutput", "none")
            default = len(cases) if fallback == "extra" else \
                fallback if isinstance(fallback, int) else None
        else:                                                      # v1, v2
            kind = params.get("dataType", "number")
            for rule in rules.get("rules") or []:
                output = int(rule.get("output", 0))
                cases.append((output, f"output {output}", conditions_expression(
                    {kind: [{"value1": params.get("value1"), "value2": rule.get("value2"),
                             "operation": rule.get("operation", "equal")}]}, reader)))
            fallback = params.get("fallbackOutput", -1)
            default = int(fallback) if isinstance(fallback, (int, str)) and \
                str(fallback).lstrip("-").isdigit() and int(fallback) >= 0 else None
    except ConditionError as exc:
        unsupported(flow, name, b, f"its rules cannot be converted ({exc}); write them as a "
                                   f"`condition` block's cases")
        return
    _condition(flow, name, params, b, cases, default)


# -- calls ------------------------------------------------------------------------

def _pairs(entries: Any, flow: Any, name: str, b: Builder) -> dict[str, Any]:
    out = {}
    for entry in (entries or {}).get("parameters") or []:
        if isinstance(entry, dict) and entry.get("name"):
            out[str(entry["name"])] = flow.text(entry.get("value", ""), name, b)
    return out


def _http(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    node = flow.nodes[name]
    dropped = []
    with_: dict[str, Any] = {"url": flow.text(params.get("url", ""), name, b),
                             "method": str(params.get("method") or params.get("requestMethod")
                                           or "GET").upper()}
    headers = _pairs(params.get("headerParameters"), flow, name, b)
    query = _pairs(params.get("queryParameters"), flow, name, b)
    if headers:
        with_["headers"] = {key: str(value) for key, value in headers.items()}
    if query:
        with_["query"] = query
    if params.get("sendBody"):
        if params.get("specifyBody") == "json":
            body = params.get("jsonBody", "")
            try:
                with_["body"] = json.loads(body)
            except (TypeError, ValueError):
                with_["body"] = flow.text(body, name, b)
        else:
            with_["body"] = _pairs(params.get("bodyParameters"), flow, name, b)
    if params.get("authentication") not in (None, "none"):
        dropped.append(f"authentication {params.get('authentication')!r}: put the key in "
                       f"`headers` as `{{{{secrets.NAME}}}}`")
    dropped += [f"options.{key}" for key in (params.get("options") or {})]
    b.add(base(flow, name, "http", with_), node.get("position"))
    b.node(flow.ids[name], name, node["type"], "http", dropped=dropped)
    flow.views[name] = View(open=f"{flow.ids[name]}.data")


def workflow_reference(params: dict[str, Any]) -> str | None:
    value = params.get("workflowId")
    if isinstance(value, dict):
        value = value.get("value")
    if not isinstance(value, (str, int)) or str(value).startswith("=") or \
            params.get("source") not in (None, "database"):
        return None
    return str(value)


def _execute_workflow(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    node = flow.nodes[name]
    reference = workflow_reference(params)
    if reference is None:
        unsupported(flow, name, b, "the workflow it runs is chosen at run time or embedded; "
                                   "import that workflow and name it in a `workflow` block")
        return
    inputs = (params.get("workflowInputs") or {}).get("value") or {}
    with_ = {"workflow": reference, "inputs": flow.text(inputs, name, b)}
    b.add(base(flow, name, "workflow", with_), node.get("position"))
    b.node(flow.ids[name], name, node["type"], "workflow")
    b.note(f"{name!r} runs the n8n workflow {reference!r}: import it too and give its "
           f"document that id")
    flow.views[name] = View(open=flow.ids[name])


def _respond(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    node = flow.nodes[name]
    respond = params.get("respondWith", "firstIncomingItem")
    options = params.get("options") or {}
    with_: dict[str, Any] = {}
    origin = flow.input_of(name)
    if respond in ("allIncomingItems", "firstIncomingItem") and origin in flow.ids:
        with_["message"] = "{{" + flow.ids[origin] + "}}"
    elif respond in ("text", "json"):
        body = params.get("responseBody", "")
        try:
            with_["message"] = json.loads(body) if respond == "json" else body
        except (TypeError, ValueError):
            with_["message"] = flow.text(body, name, b)
        with_["message"] = flow.text(with_["message"], name, b)
    if options.get("responseCode"):
        with_["status"] = int(options["responseCode"])
    headers = {entry["name"]: str(entry.get("value", ""))
               for entry in (options.get("responseHeaders") or {}).get("entries") or []
               if entry.get("name")}
    if headers:
        with_["headers"] = headers
    b.add(base(flow, name, "response", with_), node.get("position"))
    b.node(flow.ids[name], name, node["type"], "response")
    flow.views[name] = View()


_HANDLERS = {
    **{kind: _trigger for kind in _INPUT_TRIGGERS},
    "set": _set, "noOp": _no_op, "merge": _merge, "limit": _limit, "splitOut": _split_out,
    "aggregate": _aggregate, "if": _if, "filter": _filter, "switch": _switch,
    "httpRequest": _http, "executeWorkflow": _execute_workflow,
    "respondToWebhook": _respond,
}
