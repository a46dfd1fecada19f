"""One Dify node -> flowforge blocks, node type by node type.

Each converter returns the blocks the node became (usually one, whose id is
the node's) and fills the node's `NodeReport`: what it became and each
setting left behind.  A node type with no counterpart becomes an
`unsupported` block naming what to do instead.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from flowforge.formats.base import NodeReport
from flowforge.formats.dify_refs import Refs

__all__ = ["CONVERTERS", "Context", "PROVIDERS", "model_string", "unsupported"]

#: Dify provider (its last path segment) -> flowforge provider
PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "google": "google",
              "gemini": "google", "vertex_ai": "google", "azure_openai": "openai-compatible/azure",
              "ollama": "openai-compatible/ollama", "openrouter": "openai-compatible/openrouter"}
_SEARCH_TOOLS = {"tavily", "duckduckgo", "google", "bing", "searxng", "serper", "searchapi",
                 "perplexity", "websearch", "google_search", "brave", "exa"}


class Context:
    """What node converters share: references, outgoing edges, the report."""

    def __init__(self, refs: Refs, out_edges: dict[str, list[tuple[str, str]]],
                 chat: bool) -> None:
        self.refs = refs
        self.out_edges = out_edges               # node id -> [(source handle, target)]
        self.chat = chat
        self.knowledge_bases: list[str] = []
        self.notes: list[str] = []

    def targets(self, node_id: str, handle: str) -> list[str]:
        return [target for source_handle, target in self.out_edges.get(node_id, [])
                if source_handle == handle]


def model_string(model: Any, report: NodeReport) -> str | None:
    """Dify's `{provider, name, completion_params}` -> a flowforge model string."""
    if not isinstance(model, dict) or not model.get("name"):
        return None
    provider = str(model.get("provider") or "").rstrip("/").split("/")[-1]
    mapped = PROVIDERS.get(provider, f"openai-compatible/{provider}" if provider else None)
    if mapped is None:
        return str(model["name"])
    params = model.get("completion_params") or {}
    kept = {"temperature", "max_tokens"}
    for name in sorted(set(params) - kept):
        report.dropped.append(f"model.completion_params.{name}: flowforge blocks take "
                              f"temperature and max_tokens only")
    return f"{mapped}/{model['name']}"


def _model_fields(data: dict, report: NodeReport) -> dict[str, Any]:
    out: dict[str, Any] = {}
    model = model_string(data.get("model"), report)
    if model:
        out["model"] = model
    params = (data.get("model") or {}).get("completion_params") or {}
    for name in ("temperature", "max_tokens"):
        if isinstance(params.get(name), (int, float)):
            out[name] = params[name]
    return out


def unsupported(node_id: str, data: dict, instead: str, report: NodeReport) -> list[dict]:
    report.became, report.instead = None, instead
    return [{"id": node_id, "type": "unsupported", "name": data.get("title") or node_id,
             "with": {"format": "dify", "node_type": str(data.get("type")),
                      "title": str(data.get("title") or node_id), "instead": instead}}]


def _variables(items: Any, refs: Refs) -> dict[str, Any]:
    """Dify's `[{variable, value_selector}]` -> `{variable: "{{ref}}"}`."""
    return {str(item.get("variable")): refs.ref(item.get("value_selector"))
            for item in items or [] if isinstance(item, dict) and item.get("variable")}


def _answer(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "response"
    return [{"id": node_id, "type": "response", "with": {"message": ctx.refs.text(
        data.get("answer") or "")}}]


def _end(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "response"
    outputs = _variables(data.get("outputs"), ctx.refs)
    with_: dict[str, Any] = {"data": outputs}
    if len(outputs) == 1:
        with_["message"] = next(iter(outputs.values()))
    return [{"id": node_id, "type": "response", "with": with_}]


def _prompt_parts(data: dict, ctx: Context, report: NodeReport, node_id: str
                  ) -> tuple[str | None, str, list[dict]]:
    """(system, prompt, template blocks before it) of an llm node's prompt."""
    template = data.get("prompt_template")
    messages = template if isinstance(template, list) else [
        {"role": "user", **(template or {})}]
    context = data.get("context") or {}
    context_ref = ctx.refs.ref(context.get("variable_selector")) if context.get("enabled") \
        else ""
    system_parts, prompt_parts, before = [], [], []
    jinja_vars = _variables((data.get("prompt_config") or {}).get("jinja2_variables"), ctx.refs)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if message.get("edition_type") == "jinja2":
            block_id = f"{node_id}_prompt{index}"
            before.append({"id": block_id, "type": "template", "name": f"{data.get('title')} "
                           f"prompt {index}", "with": {"template": message.get("jinja2_text")
                                                       or "", "variables": jinja_vars}})
            text = "{{" + block_id + ".output}}"
        else:
            text = ctx.refs.text(message.get("text") or "")
            text = text.replace("{{#context#}}", context_ref)
        if message.get("role") == "system":
            system_parts.append(text)
        else:
            if message.get("role") == "assistant":
                report.dropped.append(f"prompt_template[{index}]: an assistant message; its "
                                      f"text is kept in the prompt")
            prompt_parts.append(text)
    return ("\n\n".join(system_parts) or None), "\n\n".join(prompt_parts), before


def _llm(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    system, prompt, before = _prompt_parts(data, ctx, report, node_id)
    with_: dict[str, Any] = {**_model_fields(data, report)}
    if system:
        with_["system"] = system
    memory = data.get("memory") or {}
    if memory and ctx.chat:
        report.became = "agent"
        query = ctx.refs.text(memory.get("query_prompt_template") or "{{#sys.query#}}")
        with_["prompt"] = "\n\n".join(part for part in (prompt, query) if part)
        with_["conversation"] = "{{input.conversation}}"
        window = (memory.get("window") or {})
        if window.get("enabled") and window.get("size"):
            with_["memory_window"] = int(window["size"])
        block_type = "agent"
    else:
        report.became = "llm"
        if not prompt and system:          # a system message alone: it is the prompt
            prompt = with_.pop("system")
        with_["prompt"] = prompt
        block_type = "llm"
        _literal_braces(with_)
    if (data.get("vision") or {}).get("enabled"):
        report.dropped.append("vision: images are not passed to the model")
    structured = data.get("structured_output") or {}
    if data.get("structured_output_enabled") and structured.get("schema"):
        with_["output_schema" if block_type == "llm" else "response_format"] = \
            structured["schema"]
    return [*before, {"id": node_id, "type": block_type, "with": with_}]


def _literal_braces(with_: dict[str, Any]) -> None:
    """Dify prompts keep `{word}` as text; the llm block would read it as a
    placeholder, so each is given its own text as its value."""
    from flowforge.blocks.llm import written_placeholders

    names = written_placeholders(f"{with_.get('system') or ''}\n{with_.get('prompt') or ''}")
    literal = {name: "{" + name + "}" for name in names if "." not in name}
    if literal:
        with_["inputs"] = literal


def _code(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    language = str(data.get("code_language") or "python3")
    if not language.startswith("python"):
        return unsupported(node_id, data, f"{language} code is reported, not run: rewrite it "
                           f"in Python as a `code` block", report)
    from flowforge.sandbox import check_source

    wrapped = f"{data.get('code') or ''}\n\nasync def execute(inputs, context):\n    return {{}}\n"
    modules = sorted({m.group(1) for text in check_source(wrapped)
                      for m in [re.search(r"module '([^']+)' is not allowed", text)] if m})
    if modules:
        return unsupported(node_id, data, f"its imports ({', '.join(modules)}) are not in "
                           f"flowforge's sandbox: rewrite it with the allowed modules (json, "
                           f"re, math, datetime, ...) as a `code` block, or call a service "
                           f"with an http block", report)
    report.became = "code"
    outputs = {name: str((spec or {}).get("type") or "any")
               for name, spec in (data.get("outputs") or {}).items()}
    return [{"id": node_id, "type": "code", "with": {
        "language": "python", "source": data.get("code") or "",
        "inputs": _variables(data.get("variables"), ctx.refs), "outputs": outputs}}]


def _template(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "template"
    return [{"id": node_id, "type": "template", "with": {
        "template": data.get("template") or "",
        "variables": _variables(data.get("variables"), ctx.refs)}}]


def _knowledge(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "knowledge"
    datasets = [str(d) for d in data.get("dataset_ids") or []] or [node_id]
    base = datasets[0]
    for extra in datasets[1:]:
        report.dropped.append(f"dataset_ids: {extra} (a knowledge block searches one base: "
                              f"add a knowledge block for it)")
    for name in datasets:
        if name not in ctx.knowledge_bases:
            ctx.knowledge_bases.append(name)
    config = data.get("multiple_retrieval_config") or data.get("single_retrieval_config") or {}
    with_: dict[str, Any] = {"knowledge_base": base,
                             "query": ctx.refs.ref(data.get("query_variable_selector"))
                             or "{{input.query}}"}
    if isinstance(config.get("top_k"), int):
        with_["top_k"] = config["top_k"]
    if config.get("reranking_enable"):
        report.dropped.append("reranking: flowforge ranks by its own search mode")
    return [{"id": node_id, "type": "knowledge", "with": with_}]


_OPS = {"=": "==", "is": "==", "≠": "!=", "is not": "!=", ">": ">", "<": "<", "≥": ">=",
        "≤": "<=", ">=": ">=", "<=": "<="}


def _condition(condition: dict, refs: Refs) -> str | None:
    path = refs.path(condition.get("variable_selector"))
    if path is None:
        return None
    op = str(condition.get("comparison_operator"))
    value = condition.get("value")
    number = condition.get("varType") == "number"
    literal = value if number and _is_number(value) else json.dumps(str(value or ""),
                                                                    ensure_ascii=False)
    if op in _OPS:
        return f"{path} {_OPS[op]} {literal}"
    return {"contains": f"contains({path}, {literal})",
            "not contains": f"not contains({path}, {literal})",
            "start with": f"str({path}).startswith({literal})",
            "end with": f"str({path}).endswith({literal})",
            "empty": f"not {path}", "not empty": f"bool({path})",
            "null": f"{path} == None", "not null": f"{path} != None",
            "in": f"{path} in {literal}", "not in": f"{path} not in {literal}"}.get(op)


def _is_number(value: Any) -> bool:
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def _if_else(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "condition"
    cases = data.get("cases") or [{"case_id": "true", "conditions": data.get("conditions"),
                                   "logical_operator": data.get("logical_operator")}]
    out = []
    for case in cases:
        handle = str(case.get("case_id") or case.get("id"))
        parts = [_condition(c, ctx.refs) for c in case.get("conditions") or []]
        if None in parts or not parts:
            report.dropped.append(f"case {handle}: a comparison flowforge expressions do not "
                                  f"write; the case never matches")
            continue
        joined = f" {case.get('logical_operator') or 'and'} ".join(f"({p})" for p in parts)
        targets = ctx.targets(node_id, handle)
        for extra in targets[1:]:
            report.dropped.append(f"case {handle} -> {extra}: a case goes to one block")
        if targets:
            out.append({"when": joined, "goto": targets[0]})
    with_: dict[str, Any] = {"cases": out}
    default = ctx.targets(node_id, "false")
    if default:
        with_["default"] = default[0]
    return [{"id": node_id, "type": "condition", "with": with_}]


def _classifier(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "router"
    classes = data.get("classes") or []
    routes = {}
    for item in classes:
        for target in ctx.targets(node_id, str(item.get("id"))):
            routes[target] = {"description": str(item.get("name") or "")}
    query = ctx.refs.ref(data.get("query_variable_selector")) or "{{input.query}}"
    instruction = ctx.refs.text(data.get("instruction") or data.get("instructions") or "")
    names = "; ".join(str(item.get("name")) for item in classes)
    prompt = f"Classify the text into one of: {names}.\n{instruction}\n\nText: {query}".strip()
    return [{"id": node_id, "type": "router", "with": {
        "prompt": prompt, "routes": routes, **_model_fields(data, report)}}]


def _extractor(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "llm"
    types = {"string": "string", "number": "number", "bool": "boolean", "boolean": "boolean",
             "select": "string", "array[string]": "array", "array[number]": "array",
             "array[object]": "array", "array[bool]": "array", "object": "object"}
    properties, required = {}, []
    for param in data.get("parameters") or []:
        name = str(param.get("name"))
        properties[name] = {"type": types.get(str(param.get("type")), "string"),
                            "description": str(param.get("description") or "")}
        if param.get("required"):
            required.append(name)
    query = ctx.refs.ref(data.get("query")) or "{{input.query}}"
    instruction = ctx.refs.text(data.get("instruction") or "")
    return [{"id": node_id, "type": "llm", "with": {
        "system": ("Extract the parameters from the text. " + instruction).strip(),
        "prompt": query, **_model_fields(data, report),
        "output_schema": {"type": "object", "properties": properties, "required": required}}}]


def _http(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "http"

    def pairs(text: Any) -> dict[str, str]:
        out = {}
        for line in str(text or "").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip():
                out[key.strip()] = ctx.refs.text(value.strip())
        return out

    with_: dict[str, Any] = {"url": ctx.refs.text(data.get("url") or ""),
                             "method": str(data.get("method") or "get").upper()}
    headers, query = pairs(data.get("headers")), pairs(data.get("params"))
    if headers:
        with_["headers"] = headers
    if query:
        with_["query"] = query
    body = data.get("body") or {}
    raw = body.get("data")
    if isinstance(raw, list):          # newer DSL: [{key, type, value}]
        raw = raw[0].get("value") if len(raw) == 1 and not raw[0].get("key") else \
            {str(item.get("key")): item.get("value") for item in raw}
    if body.get("type") == "json" and isinstance(raw, str):
        with_["body"] = ctx.refs.text(raw)
    elif body.get("type") not in (None, "none") and raw:
        with_["body"] = ctx.refs.text(raw) if isinstance(raw, str) else \
            {k: ctx.refs.text(v) for k, v in raw.items()}
    if (data.get("authorization") or {}).get("type") not in (None, "no-auth"):
        report.dropped.append("authorization: its key is not copied into the document; add a "
                              "header `{{secrets.NAME}}` after `flowforge secrets set NAME`")
    return [{"id": node_id, "type": "http", "with": with_}]


def _tool(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    provider = str(data.get("provider_id") or data.get("provider_name") or "").split("/")[-1]
    name = str(data.get("tool_name") or "")
    params = {k: ctx.refs.text((v or {}).get("value") if isinstance(v, dict) else v)
              for k, v in (data.get("tool_parameters") or {}).items()}
    if provider in _SEARCH_TOOLS or "search" in name:
        report.became = "web_search"
        query = params.get("query") or params.get("q") or next(iter(params.values()), "")
        for key in params:
            if key not in ("query", "q"):
                report.dropped.append(f"tool_parameters.{key}: web_search takes the query only")
        return [{"id": node_id, "type": "web_search", "with": {"queries": str(query)}}]
    if provider == "jina" and "reader" in name:
        report.became = "http"
        return [{"id": node_id, "type": "http", "with": {
            "url": "https://r.jina.ai/" + str(params.get("url") or ""), "method": "GET"}}]
    return unsupported(node_id, data, f"the {provider or '?'} tool '{name}' has no flowforge "
                       f"counterpart: call its API with an http block, or give an agent an "
                       f"MCP server that offers it", report)


def _agent(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    strategy = str(data.get("agent_strategy_provider_name") or "")
    if not strategy.startswith("langgenius/agent"):
        return unsupported(node_id, data, f"the agent strategy '{data.get('agent_strategy_name')}'"
                           f" is a plugin ({strategy}); use an agent block", report)
    params = {k: (v or {}).get("value") for k, v in (data.get("agent_parameters") or {}).items()}
    report.became = "agent"
    with_: dict[str, Any] = {"prompt": ctx.refs.text(params.get("query") or "{{#sys.query#}}")}
    if params.get("instruction"):
        with_["system"] = ctx.refs.text(params["instruction"])
    model = model_string({"name": (params.get("model") or {}).get("model"),
                          "provider": (params.get("model") or {}).get("provider")}, report)
    if model:
        with_["model"] = model
    if isinstance(params.get("maximum_iterations"), int):
        with_["max_iterations"] = params["maximum_iterations"]
    for tool in params.get("tools") or []:
        report.dropped.append(f"tools: {tool.get('tool_name') or tool}: give the agent an MCP "
                              f"server or tool that does this")
    for key in sorted(set(params) - {"query", "instruction", "model", "maximum_iterations",
                                     "tools"}):
        report.dropped.append(f"agent_parameters.{key}")
    if ctx.chat:
        with_["conversation"] = "{{input.conversation}}"
    return [{"id": node_id, "type": "agent", "with": with_}]


def _assigner(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "set"
    items = data.get("items") or [{"variable_selector": data.get("assigned_variable_selector"),
                                   "value": data.get("input_variable_selector"),
                                   "input_type": "variable",
                                   "operation": data.get("write_mode") or "over-write"}]
    with_: dict[str, Any] = {}
    for item in items:
        selector = item.get("variable_selector") or []
        if len(selector) < 2:
            continue
        name = str(selector[-1])
        ctx.refs.memory.add(name)
        operation = str(item.get("operation") or item.get("write_mode") or "over-write")
        value = item.get("value")
        if operation == "clear":
            with_[name] = None
        elif operation in ("over-write", "set"):
            with_[name] = ctx.refs.ref(value) if item.get("input_type") == "variable" else value
        else:
            report.dropped.append(f"{name}: the operation '{operation}' (only over-write, set "
                                  f"and clear are converted)")
    return [{"id": node_id, "type": "set", "with": with_}]


def _aggregator(node_id: str, data: dict, ctx: Context, report: NodeReport) -> list[dict]:
    report.became = "set"
    groups = (data.get("advanced_settings") or {}).get("groups") or []
    selectors = data.get("variables") or [s for g in groups for s in g.get("variables") or []]
    paths = [p for p in (ctx.refs.path(s) for s in selectors) if p]
    expr = " or ".join(paths) if paths else "None"
    return [{"id": node_id, "type": "set", "with": {"output": {"expr": expr}}}]


CONVERTERS: dict[str, Callable[[str, dict, Context, NodeReport], list[dict]]] = {
    "answer": _answer, "end": _end, "llm": _llm, "code": _code,
    "template-transform": _template, "knowledge-retrieval": _knowledge, "if-else": _if_else,
    "question-classifier": _classifier, "parameter-extractor": _extractor,
    "http-request": _http, "tool": _tool, "agent": _agent, "assigner": _assigner,
    "variable-assigner": _aggregator, "variable-aggregator": _aggregator,
}
