"""One flowforge block -> one Dify node's `data`, block type by block type.

Each writer is the inverse of its converter in dify_nodes.py, so that a
document flowforge imported comes back from Dify as the same document.  A
setting a writer has no Dify place for is a problem naming the block (the
export is refused with the list), never dropped silently.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from flowforge.formats.dify_export_refs import Paths, comparisons
from flowforge.formats.dify_nodes import PROVIDERS
from flowforge.model_strings import parse_model

__all__ = ["WRITERS", "Writer", "dify_model", "gathered", "EXTRACT"]

#: flowforge provider -> Dify provider (the inverse of dify_nodes.PROVIDERS)
_BACK_PROVIDERS = {"google": "google"}
for _dify, _ours in PROVIDERS.items():
    _BACK_PROVIDERS.setdefault(_ours, _dify)
EXTRACT = "Extract the parameters from the text."
_CLASSIFY = re.compile(r"Classify the text into one of: (?P<names>.*?)\.\n(?P<instruction>.*)"
                       r"\n\nText: (?P<query>\{\{[^{}]*\}\})", re.DOTALL)
_PARAM_TYPES = {"string": "string", "number": "number", "boolean": "boolean",
                "array": "array[string]", "object": "object"}
_GATHER = re.compile(r"pluck\(pluck\((?P<each>\w+)\.results, '(?P<child>[^']+)'\), "
                     r"'(?P<field>[^']+)'\)")


class Writer:
    """What writers share: the document's paths, its mode, its memory keys, and
    the outgoing handles a condition or router gives each of its targets."""

    def __init__(self, paths: Paths, chat: bool, memory: set[str]) -> None:
        self.paths = paths
        self.chat = chat
        self.memory = memory
        self.handles: dict[tuple[str, str], list[str]] = {}  # (source, target) -> handles

    def handle(self, source: str, target: str, handle: str) -> None:
        self.handles.setdefault((source, target), []).append(handle)

    def extra(self, spec: dict, allowed: set[str]) -> None:
        for key in sorted(set(spec.get("with") or {}) - allowed):
            self.paths.problem(f"`{key}` has no place on Dify's "
                               f"{_NODE_TYPES.get(spec['type'], spec['type'])} node")


def dify_model(model: Any, with_: dict, paths: Paths) -> dict[str, Any]:
    """A flowforge model string (and temperature, max_tokens) as Dify's model."""
    params = {k: with_[k] for k in ("temperature", "max_tokens") if k in with_}
    if not model:
        return {"provider": "", "name": "", "mode": "chat", "completion_params": params}
    text = str(model)
    parsed = parse_model(text)
    provider, name = parsed.provider, parsed.name
    if parsed.server and parsed.served_name:
        name = parsed.served_name
        provider = _BACK_PROVIDERS.get(f"openai-compatible/{parsed.server}", parsed.server)
    elif not name:
        provider, name = "", text
    elif provider in _BACK_PROVIDERS:
        provider = _BACK_PROVIDERS[provider]
    else:
        paths.problem(f"the model {text!r} has no Dify provider (Dify names openai, "
                      f"anthropic, google or an OpenAI-compatible server)")
    return {"provider": provider, "name": name, "mode": "chat", "completion_params": params}


def _variables(mapping: Any, w: Writer, setting: str) -> list[dict]:
    return [{"variable": str(name), "value_selector": w.paths.whole(value, f"{setting}.{name}")}
            for name, value in (mapping or {}).items()]


def _response(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"message", "data"})
    if "data" in with_:
        data = with_["data"] if isinstance(with_["data"], dict) else {}
        if not isinstance(with_["data"], dict) or "message" in with_ and (
                len(data) != 1 or with_["message"] != next(iter(data.values()))):
            w.paths.problem("a response with both `message` and `data` exports as Dify's end "
                            "node, whose outputs are `data` (one output is also the message)")
        return {"type": "end", "outputs": _variables(data, w, "data")}
    return {"type": "answer", "answer": w.paths.text(with_.get("message") or ""),
            "variables": []}


def _messages(with_: dict, w: Writer, jinja: dict[str, dict]) -> list[dict]:
    """system and prompt as Dify's messages; a prompt written by a folded template
    block (`{{<id>_prompt<n>.output}}`) is a Jinja2 message again."""
    out = []
    for role in ("system", "user"):
        text = with_.get("system" if role == "system" else "prompt")
        if not text:
            continue
        template = jinja.get(str(text))
        if template is not None:
            out.append({"role": role, "edition_type": "jinja2", "text": "",
                        "jinja2_text": template["with"].get("template") or ""})
        else:
            out.append({"role": role, "text": w.paths.text(text)})
    return out


def _llm(spec: dict, w: Writer, jinja: dict[str, dict] | None = None) -> dict:
    with_ = dict(spec.get("with") or {})
    schema = with_.get("output_schema") or {}
    if _is_extractor(with_):
        return _extractor(spec, w)
    inputs = with_.pop("inputs", None) or {}
    if any(value != "{" + str(name) + "}" for name, value in inputs.items()):
        w.paths.problem("`inputs`: Dify prompts read variables by reference only")
    w.extra(spec, {"model", "temperature", "max_tokens", "system", "prompt", "inputs",
                   "output_schema"})
    data: dict[str, Any] = {
        "type": "llm", "model": dify_model(with_.get("model"), with_, w.paths),
        "prompt_template": _messages(with_, w, jinja or {}),
        "context": {"enabled": False, "variable_selector": []}, "vision": {"enabled": False}}
    if schema:
        data["structured_output_enabled"] = True
        data["structured_output"] = {"schema": schema}
    if jinja:
        variables = next(iter(jinja.values()))["with"].get("variables") or {}
        data["prompt_config"] = {"jinja2_variables": _variables(variables, w, "variables")}
    return data


def _is_extractor(with_: dict) -> bool:
    """An llm block shaped as dify_nodes writes a parameter extractor."""
    schema = with_.get("output_schema") or {}
    system = str(with_.get("system") or "")
    return system.startswith(EXTRACT) and set(schema) == {"type", "properties", "required"} \
        and all(set(p) == {"type", "description"} and p["type"] in _PARAM_TYPES
                for p in (schema.get("properties") or {}).values()) \
        and set(with_) <= {"system", "prompt", "output_schema", "model", "temperature",
                           "max_tokens"}


def _extractor(spec: dict, w: Writer) -> dict:
    with_ = spec["with"]
    schema = with_["output_schema"]
    required = set(schema.get("required") or [])
    return {"type": "parameter-extractor", "model": dify_model(with_.get("model"), with_,
                                                              w.paths),
            "query": w.paths.whole(with_.get("prompt"), "prompt"),
            "instruction": w.paths.text(str(with_.get("system"))[len(EXTRACT):].strip()),
            "parameters": [{"name": name, "type": _PARAM_TYPES[p["type"]],
                            "description": p["description"], "required": name in required}
                           for name, p in schema["properties"].items()],
            "reasoning_mode": "prompt"}


def _agent(spec: dict, w: Writer, jinja: dict[str, dict] | None = None) -> dict:
    """A chat agent that keeps the conversation is Dify's llm with memory; any
    other agent is Dify's agent node (function calling, no tools)."""
    with_ = spec.get("with") or {}
    memory_keys = {"model", "temperature", "max_tokens", "system", "prompt", "conversation",
                   "memory_window", "response_format"}
    if w.chat and with_.get("conversation") == "{{input.conversation}}" and \
            "max_iterations" not in with_:
        w.extra(spec, memory_keys)
        window = with_.get("memory_window")
        data: dict[str, Any] = {
            "type": "llm", "model": dify_model(with_.get("model"), with_, w.paths),
            "prompt_template": _messages({"system": with_.get("system")}, w, jinja or {}),
            "memory": {"query_prompt_template": w.paths.text(with_.get("prompt") or ""),
                       "role_prefix": {"assistant": "", "user": ""},
                       "window": {"enabled": bool(window), "size": window or 10}},
            "context": {"enabled": False, "variable_selector": []},
            "vision": {"enabled": False}}
        if with_.get("response_format"):
            data["structured_output_enabled"] = True
            data["structured_output"] = {"schema": with_["response_format"]}
        return data
    w.extra(spec, {"prompt", "system", "model", "max_iterations"}
            | ({"conversation"} if w.chat else set()))
    model = dify_model(with_.get("model"), {}, w.paths)
    params: dict[str, Any] = {
        "query": {"type": "string", "value": w.paths.text(with_.get("prompt") or "")},
        "model": {"type": "model-selector", "value": {
            "provider": model["provider"], "model": model["name"], "mode": "chat",
            "type": "llm", "completion_params": {}}},
        "tools": {"type": "array[tools]", "value": []}}
    if with_.get("system"):
        params["instruction"] = {"type": "string", "value": w.paths.text(with_["system"])}
    if "max_iterations" in with_:
        params["maximum_iterations"] = {"type": "number", "value": with_["max_iterations"]}
    return {"type": "agent", "agent_strategy_provider_name": "langgenius/agent/agent",
            "agent_strategy_name": "function_calling", "agent_strategy_label": "FunctionCalling",
            "agent_parameters": params}


def _template(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"template", "variables"})
    return {"type": "template-transform", "template": with_.get("template") or "",
            "variables": _variables(with_.get("variables"), w, "variables")}


def _code(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"language", "source", "inputs", "outputs"})
    if with_.get("language", "python") != "python":
        w.paths.problem("Dify's code node runs Python 3 or JavaScript; only python exports")
    return {"type": "code", "code_language": "python3", "code": with_.get("source") or "",
            "variables": _variables(with_.get("inputs"), w, "inputs"),
            "outputs": {str(name): {"type": str(kind), "children": None}
                        for name, kind in (with_.get("outputs") or {}).items()}}


def _knowledge(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"knowledge_base", "query", "top_k"})
    config: dict[str, Any] = {"reranking_enable": False}
    if "top_k" in with_:
        config["top_k"] = with_["top_k"]
    return {"type": "knowledge-retrieval", "dataset_ids": [str(with_.get("knowledge_base"))],
            "query_variable_selector": w.paths.whole(with_.get("query") or "{{input.query}}",
                                                     "query"),
            "retrieval_mode": "multiple", "multiple_retrieval_config": config}


def _condition(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"cases", "default"})
    cases = []
    for index, case in enumerate(with_.get("cases") or []):
        read = comparisons(str(case.get("when")), w.paths)
        if read is None:
            w.paths.problem(f"cases[{index}].when: {case.get('when')!r} is not a comparison "
                            f"Dify writes (a variable compared with a constant, contains, "
                            f"starts with, empty, ...; joined by and or or)")
            continue
        handle = "true" if index == 0 else f"case{index + 1}"
        cases.append({"case_id": handle, "id": handle, "logical_operator": read[0],
                      "conditions": read[1]})
        w.handle(spec["id"], str(case.get("goto")), handle)
    if with_.get("default"):
        w.handle(spec["id"], str(with_["default"]), "false")
    return {"type": "if-else", "cases": cases}


def _router(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"prompt", "routes", "model", "temperature", "max_tokens"})
    routes = with_.get("routes") or {}
    found = _CLASSIFY.fullmatch(str(with_.get("prompt") or ""))
    names = found.group("names").split("; ") if found else \
        [str((route or {}).get("description") or target) for target, route in routes.items()]
    classes = [{"id": str(index + 1), "name": name} for index, name in enumerate(names)]
    free = list(classes)
    for target, route in routes.items():
        if set(route or {}) - {"description"}:
            w.paths.problem(f"routes.{target}: Dify's classes carry a name only")
        match = next((c for c in free if c["name"] == str((route or {}).get("description"))),
                     None)
        if match is None:
            match = {"id": str(len(classes) + 1), "name": str((route or {}).get("description")
                                                               or target)}
            classes.append(match)
        else:
            free.remove(match)
        w.handle(spec["id"], str(target), match["id"])
    if found:
        query, instruction = found.group("query"), found.group("instruction")
    else:
        query, instruction = "{{input.query}}", str(with_.get("prompt") or "")
    return {"type": "question-classifier", "classes": classes,
            "query_variable_selector": w.paths.whole(query, "prompt"),
            "instruction": w.paths.text(instruction),
            "model": dify_model(with_.get("model"), with_, w.paths)}


def _http(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"url", "method", "headers", "query", "body"})

    def lines(mapping: Any, setting: str) -> str:
        out = []
        for key, value in (mapping or {}).items():
            if "\n" in f"{key}{value}" or ":" in str(key):
                w.paths.problem(f"{setting}.{key}: Dify writes one `name:value` per line")
            out.append(f"{key}:{w.paths.text(str(value))}")
        return "\n".join(out)

    body = with_.get("body")
    if body is None:
        dify_body: dict[str, Any] = {"type": "none", "data": []}
    else:
        if not isinstance(body, str):
            body = json.dumps(body, ensure_ascii=False)     # flowforge sends it as JSON
        dify_body = {"type": "json", "data": w.paths.text(body)}
    return {"type": "http-request", "method": str(with_.get("method") or "GET").lower(),
            "url": w.paths.text(with_.get("url") or ""),
            "headers": lines(with_.get("headers"), "headers"),
            "params": lines(with_.get("query"), "query"),
            "body": dify_body, "authorization": {"type": "no-auth", "config": None},
            "timeout": {"max_connect_timeout": 0, "max_read_timeout": 0,
                        "max_write_timeout": 0}}


def _web_search(spec: dict, w: Writer) -> dict:
    with_ = spec.get("with") or {}
    w.extra(spec, {"queries"})
    if not isinstance(with_.get("queries"), str):
        w.paths.problem("queries: Dify's search tool takes one query text")
    return {"type": "tool", "provider_id": "tavily", "provider_name": "tavily",
            "provider_type": "builtin", "tool_name": "tavily_search",
            "tool_label": "TavilySearch", "tool_configurations": {},
            "tool_parameters": {"query": {"type": "mixed",
                                          "value": w.paths.text(str(with_.get("queries")))}}}


def _set(spec: dict, w: Writer) -> dict:
    """A `set` gathering alternatives (`output: {expr: "a.x or b.y"}`) is a variable
    aggregator; one writing memory keys is a variable assigner."""
    with_ = spec.get("with") or {}
    expr = (with_.get("output") or {}).get("expr") if set(with_) == {"output"} and \
        isinstance(with_.get("output"), dict) else None
    if isinstance(expr, str):
        parts = [] if expr == "None" else [part.strip() for part in expr.split(" or ")]
        selectors = [w.paths.selector(part) for part in parts]
        return {"type": "variable-aggregator", "output_type": "string",
                "variables": [s for s in selectors if s]}
    items = []
    for name, value in with_.items():
        if name not in w.memory:
            w.paths.problem(f"`{name}`: a set block exports as Dify's variable assigner, which "
                            f"writes conversation variables: list `{name}` under `memory:`, "
                            f"or compute it in a template or code block")
            continue
        item: dict[str, Any] = {"variable_selector": ["conversation", name]}
        if value is None:
            item.update(operation="clear", input_type="constant", value=None)
        elif isinstance(value, str) and value.strip().startswith("{{"):
            item.update(operation="over-write", input_type="variable",
                        value=w.paths.whole(value, name))
        elif isinstance(value, dict):
            w.paths.problem(f"`{name}`: an expression has no Dify assigner counterpart")
            continue
        else:
            item.update(operation="set", input_type="constant", value=value)
        items.append(item)
    return {"type": "assigner", "version": "2", "items": items}


def gathered(spec: dict) -> tuple[str, str] | None:
    """(child id, field) an iteration's gathering set reads, or None."""
    expr = ((spec.get("with") or {}).get("output") or {})
    found = _GATHER.fullmatch(str(expr.get("expr") or "")) if isinstance(expr, dict) else None
    return (found.group("child"), found.group("field")) if found else None


_NODE_TYPES = {"response": "answer/end", "llm": "llm", "agent": "agent", "template":
               "template-transform", "code": "code", "knowledge": "knowledge-retrieval",
               "condition": "if-else", "router": "question-classifier", "http": "http-request",
               "web_search": "search tool", "set": "variable assigner/aggregator",
               "parallel": "iteration"}
WRITERS: dict[str, Callable[..., dict]] = {
    "response": _response, "llm": _llm, "agent": _agent, "template": _template, "code": _code,
    "knowledge": _knowledge, "condition": _condition, "router": _router, "http": _http,
    "web_search": _web_search, "set": _set,
}
