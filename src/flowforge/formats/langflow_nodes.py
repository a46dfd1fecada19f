"""The Langflow component table: what each component becomes (`convert`).

Main components (chat input and output, prompts, models, agents, routers,
URL loaders, parsers, vector-store searches, batch runs) become one block
each and record how later edges read their outputs (`Graph.refs`).
Sub-components (a model wired into an agent, tools, memories, embeddings,
splitters and files feeding a vector store) are folded into the block they
serve; anything else is an `unsupported` block saying what to do instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.formats._flowgraph import Builder, slug
from flowforge.formats._flowparts import GENERIC_INSTEAD, SEARCH_TOOLS, calculator_tool, \
    chat_model, jinja_prompt, model_fields, number, prompt_vars, search_tool
from flowforge.formats.langflow import Graph

__all__ = ["convert"]

_AGENTS = {"Agent", "ToolCallingAgent", "OpenAIToolsAgent", "OpenAIFunctionsAgent",
           "XMLAgent", "ReActAgent", "AgentComponent"}
_CALCULATORS = {"CalculatorTool", "Calculator", "CalculatorComponent"}
_SPLITTERS = {"SplitText", "RecursiveCharacterTextSplitter", "CharacterTextSplitter",
              "LanguageRecursiveTextSplitter", "NaturalLanguageTextSplitter"}
_MEMORIES = {"Memory", "ChatMemory", "MessageHistory"}
_LLM_FIELDS = ("llm", "model", "agent_llm", "language_model")
_CREW_INSTEAD = ("flowforge has no crews: write each CrewAI agent as an `agent` block (its "
                 "role, goal and backstory as the system prompt, its tools as `tools:`) and "
                 "each task as that agent's prompt, chained by references")
_FILE_INSTEAD = ("flowforge flows read no uploaded files: declare the text as a run input "
                 "(`inputs:`), or load the file into a knowledge base (`flowforge kb add`) "
                 "and search it with a `knowledge` block")


def _is_model(g: Graph, node_id: str) -> bool:
    kind = g.kind[node_id]
    return kind == "LanguageModelComponent" or bool(re.search(r"Model(Component)?$", kind)) \
        and "Embedding" not in kind


def _is_store(g: Graph, node_id: str) -> bool:
    template = g.template(node_id)
    return "ingest_data" in template and ("search_input" in template or
                                          "search_query" in template)


def _is_embeddings(g: Graph, node_id: str) -> bool:
    return "Embedding" in g.kind[node_id]


def _kb(g: Graph, node_id: str) -> str:
    for key in ("collection_name", "index_name", "collection", "table_name", "persist_directory"):
        value = g.value(node_id, key)
        if isinstance(value, str) and value.strip():
            return slug(value)
    return slug(g.title[node_id])


def _model(g: Graph, node_id: str) -> tuple[dict[str, Any], list[str]]:
    """`model`, `temperature`, `max_tokens` of a model component."""
    kind = g.kind[node_id]
    vendor_word = str(g.value(node_id, "provider") or kind) \
        if kind == "LanguageModelComponent" else kind
    name = g.value(node_id, "model_name") or g.value(node_id, "model") or \
        g.value(node_id, "model_id") or g.value(node_id, "azure_deployment")
    found, dropped = model_fields(vendor_word, name, g.value(node_id, "temperature"),
                                  g.value(node_id, "max_tokens"),
                                  g.value(node_id, "openai_api_base") or
                                  g.value(node_id, "base_url"))
    if g.value(node_id, "json_mode") in (True, "True"):
        dropped.append("json_mode: give the block an `output_schema`")
    return found, dropped


# -- the walk -----------------------------------------------------------------

class _Walk:
    """What a first look at the edges decides: which nodes are folded into
    which, the memories, the knowledge bases fed by ingestion."""

    def __init__(self, g: Graph):
        self.owner: dict[str, str] = {}          # sub-node -> the node it serves
        self.memory: dict[str, str] = {}         # model or agent -> its memory node
        self.blank: set[tuple[str, str]] = set()  # (prompt, field) a memory fed
        self.ingested: dict[str, str] = {}       # node feeding a store -> knowledge base
        for node_id in g.nodes:
            for output, target, field in g.outs[node_id]:
                if field in _LLM_FIELDS and output != "text_output" or field == "tools" or \
                        field == "embedding":
                    self.owner.setdefault(node_id, target)
            if g.kind[node_id] in _MEMORIES:
                for _, target, field in g.outs[node_id]:
                    if g.kind[target] == "Prompt":
                        self.blank.add((target, field))
                        for _, model, _ in g.outs[target]:
                            self.memory.setdefault(model, node_id)
                    else:
                        self.memory.setdefault(target, node_id)
            if _is_store(g, node_id) and g.sources(node_id, "ingest_data"):
                stack = [origin for origin, _ in g.sources(node_id, "ingest_data")]
                while stack:
                    origin = stack.pop()
                    if origin not in self.ingested:
                        self.ingested[origin] = _kb(g, node_id)
                        stack += [o for pairs in g.ins[origin].values() for o, _ in pairs]


def convert(g: Graph, b: Builder) -> None:
    walk = _Walk(g)
    for node_id in g.order():
        if node_id in walk.owner or node_id in walk.ingested:
            continue
        if g.kind[node_id] in _MEMORIES and any(m == node_id for m in walk.memory.values()):
            continue
        handler = _HANDLERS.get(g.kind[node_id])
        if handler is None:
            handler = _llm if _is_model(g, node_id) else _store if _is_store(g, node_id) \
                else _unsupported
        handler(g, node_id, b, walk)
    reported = {entry.id for entry in b.report.nodes}
    for node_id in g.order():
        if g.ids[node_id] in reported:
            continue
        if node_id in walk.ingested:
            kb = walk.ingested[node_id]
            b.knowledge_base(kb)
            b.node(g.ids[node_id], g.title[node_id], g.kind[node_id],
                   f"documents of knowledge base {kb!r}",
                   dropped=[f"ingestion: load the documents with `flowforge kb add {kb} "
                            f"FILES` (the base chunks and embeds them itself)"])
            continue
        served = walk.owner.get(node_id) or next(
            (target for target, memory in walk.memory.items() if memory == node_id), None)
        b.unsupported(g.ids[node_id], g.title[node_id], g.kind[node_id],
                      _orphan_instead(g, node_id, served), g.position(node_id))


def _orphan_instead(g: Graph, node_id: str, served: str | None) -> str:
    """What to do with a sub-node whose parent has no counterpart."""
    what = f"it serves {g.title[served]!r}, which has no counterpart" if served \
        else "nothing reads it"
    if _is_model(g, node_id):
        model = _model(g, node_id)[0].get("model")
        return f"{what}; when that is rebuilt as an `agent` or `llm` block, give it " \
               f"`model: {model or '<provider>/<model>'}`"
    if re.sub(r"[^a-z]", "", g.kind[node_id].lower()) in SEARCH_TOOLS:
        return f"{what}; when that is rebuilt as an `agent` block, give it a `web_search` tool"
    return f"{what}; {GENERIC_INSTEAD}"


def _add(g: Graph, node_id: str, b: Builder, type_: str, with_: dict[str, Any],
         became: str | None = None, dropped: list[str] | None = None,
         skip: tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    block = {"id": g.ids[node_id], "type": type_, "name": g.title[node_id],
             "description": g.description(node_id), "after": g.after(node_id, skip),
             "with": with_, **more}
    added = b.add(block, g.position(node_id))
    b.node(g.ids[node_id], g.title[node_id], g.kind[node_id], became or type_, dropped=dropped)
    g.blocked.add(node_id)
    return added


def _unsupported(g: Graph, node_id: str, b: Builder, walk: _Walk,
                 instead: str | None = None) -> None:
    kind = g.kind[node_id]
    if instead is None:
        instead = _CREW_INSTEAD if "Crew" in kind or kind.startswith(
            ("Hierarchical", "Sequential")) else _FILE_INSTEAD if kind in ("File", "Directory") \
            else GENERIC_INSTEAD
    b.unsupported(g.ids[node_id], g.title[node_id], kind, instead, g.position(node_id),
                  after=g.after(node_id), description=g.description(node_id))
    g.blocked.add(node_id)
    g.refs[node_id] = {"*": g.ids[node_id]}


# -- inputs and outputs ------------------------------------------------------------

def _chat_input(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    schema: dict[str, Any] = {"type": "string", "description": "The chat message"}
    if g.value(node_id, "input_value"):
        schema["default"] = g.value(node_id, "input_value")
    b.inputs.setdefault("query", schema)
    _add(g, node_id, b, "input", {})
    g.refs[node_id] = {"*": "input.query"}


def _text_input(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    key = slug(g.title[node_id], "text")
    schema: dict[str, Any] = {"type": "string", "description": g.title[node_id]}
    if g.value(node_id, "input_value") is not None:
        schema["default"] = str(g.value(node_id, "input_value"))
    b.inputs.setdefault(key, schema)
    _add(g, node_id, b, "input", {})
    g.refs[node_id] = {"*": f"input.{key}"}


def _output(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    _add(g, node_id, b, "response", {"message": g.field(node_id, "input_value", b)})
    g.refs[node_id] = {"*": f"{g.ids[node_id]}.message"}


# -- prompts and text ---------------------------------------------------------------

def _prompt(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    text = str(g.value(node_id, "template", ""))
    references, literals, dropped = {}, {}, []
    for name in prompt_vars(text):
        if (node_id, name) in walk.blank:
            dropped.append(f"{{{name}}} ({g.title[g.sources(node_id, name)[0][0]]}): the "
                           f"history reaches the model as its conversation")
            continue
        value = g.field(node_id, name, b)
        if isinstance(value, str) and value.startswith("{{"):
            references[name] = value
        else:
            literals[name] = value
    template, variables = jinja_prompt(text, references, literals)
    _add(g, node_id, b, "template", {"template": template, "variables": variables},
         dropped=dropped)
    g.refs[node_id] = {"*": f"{g.ids[node_id]}.output"}


def _parse(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    """Parse Data: each item through a `{field}` template, joined: a Jinja2 loop."""
    origin = next(iter(g.sources(node_id, "data")), None)
    items, text = g.items.get(origin[0], ("", "item")) if origin else ("", "item")
    if origin and not items:
        items = g.ref(origin[0], origin[1]) or ""
    each = str(g.value(node_id, "template", "{text}"))
    body = re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}",
                  lambda m: "{{ " + (text if m.group(1) == "text" else
                                     f"item.{m.group(1)}") + " }}",
                  each.replace("{% ", "{ %").replace("{{", "{ {"))
    sep = str(g.value(node_id, "sep", "\n")).replace("\\n", "\n")
    template = "{% for item in data %}" + body + "{% if not loop.last %}" + sep + \
        "{% endif %}{% endfor %}"
    _add(g, node_id, b, "template", {"template": template, "variables": {"data": items}})
    g.refs[node_id] = {"*": f"{g.ids[node_id]}.output"}


def _url(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    urls = g.value(node_id, "urls", [])
    urls = [urls] if isinstance(urls, str) else [u for u in urls if isinstance(u, str) and u]
    urls = [u if "://" in u else f"https://{u}" for u in urls]
    block_id = g.ids[node_id]
    if len(urls) == 1:
        _add(g, node_id, b, "http", {"url": urls[0], "method": "GET"})
        g.items[node_id] = (["{{" + block_id + ".data}}"], "item")   # type: ignore[assignment]
        g.refs[node_id] = {"*": f"{block_id}.data"}
        return
    _add(g, node_id, b, "parallel", {"for_each": urls, "max_concurrency": 4}, became="parallel",
         blocks=[{"id": "fetch", "type": "http", "with": {"url": "{{loop.item}}",
                                                          "method": "GET"}}],
         dropped=["one page per URL: a `parallel` block fetches each (its `results`)"])
    g.items[node_id] = ("{{" + block_id + ".results}}", "item.fetch.data")
    g.refs[node_id] = {"*": f"{block_id}.results"}


# -- models and agents ------------------------------------------------------------------

def _conversation(g: Graph, target: str, b: Builder, with_: dict[str, Any],
                  walk: _Walk) -> None:
    memory = walk.memory.get(target)
    if memory is None:
        return
    b.inputs.setdefault("session_id", {"type": "string", "default": "default",
                                       "description": "The conversation's id"})
    with_["conversation"] = "{{input.session_id}}"
    window = number(g.value(memory, "n_messages"))
    if isinstance(window, int) and window > 0:
        with_["memory_window"] = window
    if g.ids[memory] not in {entry.id for entry in b.report.nodes}:
        b.node(g.ids[memory], g.title[memory], g.kind[memory],
               f"conversation of {g.title[target]!r}",
               dropped=["storage and order: flowforge keeps the history per conversation id "
                        "(`session_id`)"])


def _llm(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    with_: dict[str, Any] = {"prompt": g.field(node_id, "input_value", b)}
    system = g.field(node_id, "system_message", b)
    if system:
        with_["system"] = system
    settings, dropped = _model(g, node_id)
    with_.update(settings)
    type_ = "llm"
    if walk.memory.get(node_id):
        type_ = "agent"
        _conversation(g, node_id, b, with_, walk)
    elif not isinstance(with_["prompt"], str) or "{" in with_["prompt"].replace("{{", ""):
        with_ = {"prompt": "{prompt}", "inputs": {"prompt": with_["prompt"]},
                 **{k: v for k, v in with_.items() if k != "prompt"}}
    _add(g, node_id, b, type_, with_, dropped=dropped)
    g.refs[node_id] = {"*": f"{g.ids[node_id]}.content"}


def _tool(g: Graph, tool: str, agent: str, b: Builder) -> dict[str, Any] | None:
    kind = g.kind[tool]
    if re.sub(r"[^a-z]", "", kind.lower()) in SEARCH_TOOLS:
        entry, dropped = search_tool(kind)
        b.node(g.ids[tool], g.title[tool], kind, f"web_search tool of {g.title[agent]!r}",
               dropped=dropped)
        return entry
    if kind in _CALCULATORS:
        b.node(g.ids[tool], g.title[tool], kind, f"calculator tool of {g.title[agent]!r}")
        return calculator_tool()
    if _is_store(g, tool):
        kb = _kb(g, tool)
        _embeddings(g, tool, kb, b)
        b.node(g.ids[tool], g.title[tool], kind, f"knowledge_search tool of {g.title[agent]!r}")
        options: dict[str, Any] = {"knowledge_base": kb}
        top_k = number(g.value(tool, "number_of_results"))
        if isinstance(top_k, int) and top_k > 0:
            options["top_k"] = top_k
        return {"knowledge_search": options, "name": slug(g.title[tool], "search")}
    return None


def _agent(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    with_: dict[str, Any] = {"prompt": g.field(node_id, "input_value", b)}
    system = g.field(node_id, "system_prompt", b) or g.field(node_id, "system_message", b)
    if system:
        with_["system"] = system
    dropped: list[str] = []
    model = next((origin for field in _LLM_FIELDS for origin, _ in g.sources(node_id, field)),
                 None)
    if model is not None and _is_model(g, model):
        settings, model_dropped = _model(g, model)
        with_.update(settings)
        b.node(g.ids[model], g.title[model], g.kind[model], f"model of {g.title[node_id]!r}",
               dropped=model_dropped)
    elif g.value(node_id, "agent_llm") not in (None, "Custom"):
        written, vendor = chat_model(str(g.value(node_id, "agent_llm")),
                                     g.value(node_id, "model_name"))
        if written:
            with_["model"] = written
        else:
            dropped.append(f"model of {vendor!r}: set `model:`")
    tools, failed = [], []
    for origin, _ in g.sources(node_id, "tools"):
        entry = _tool(g, origin, node_id, b)
        (tools if entry else failed).append(entry or origin)
    if tools:
        with_["tools"] = tools
    _conversation(g, node_id, b, with_, walk)
    _add(g, node_id, b, "agent", with_, dropped=dropped, skip=_LLM_FIELDS + ("tools", "memory"))
    g.refs[node_id] = {"*": f"{g.ids[node_id]}.content"}
    for origin in failed:
        b.unsupported(g.ids[origin], g.title[origin], g.kind[origin],
                      f"a tool of {g.title[node_id]!r} with no counterpart: {GENERIC_INSTEAD}; "
                      f"then list it in the agent's `tools:`", g.position(origin),
                      after=[g.ids[node_id]])


# -- knowledge, routing, batches -----------------------------------------------------------

def _embeddings(g: Graph, node_id: str, kb: str, b: Builder) -> None:
    b.knowledge_base(kb)
    for origin, _ in g.sources(node_id, "embedding"):
        b.node(g.ids[origin], g.title[origin], g.kind[origin],
               f"embeddings of knowledge base {kb!r}",
               dropped=["embedding model: the knowledge base's own"])


def _store(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    kb = _kb(g, node_id)
    _embeddings(g, node_id, kb, b)
    dropped = []
    if g.sources(node_id, "ingest_data"):
        dropped.append(f"ingest_data: load the documents with `flowforge kb add {kb} FILES`")
    query = g.field(node_id, "search_input", b) or g.field(node_id, "search_query", b)
    if not query and not g.outs[node_id]:
        b.node(g.ids[node_id], g.title[node_id], g.kind[node_id], f"knowledge base {kb!r}",
               dropped=dropped)
        return
    with_: dict[str, Any] = {"knowledge_base": kb, "query": query or "{{input.query}}"}
    top_k = number(g.value(node_id, "number_of_results"))
    if isinstance(top_k, int) and top_k > 0:
        with_["top_k"] = top_k
    _add(g, node_id, b, "knowledge", with_, dropped=dropped,
         skip=("embedding", "ingest_data"))
    g.items[node_id] = ("{{" + g.ids[node_id] + ".results}}", "item.content")
    g.refs[node_id] = {"*": f"{g.ids[node_id]}.context"}


_OPERATORS = {"equals": "{a} == {b}", "not equals": "{a} != {b}",
              "contains": "{b} in {a}", "starts with": "{a}.startswith({b})",
              "ends with": "{a}.endswith({b})"}


def _router(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    operator = str(g.value(node_id, "operator", "equals"))
    left = g.field(node_id, "input_text", b)
    right = g.field(node_id, "match_text", b)
    if operator not in _OPERATORS or not isinstance(left, str):
        _unsupported(g, node_id, b, walk, f"its operator {operator!r} has no expression "
                                          f"counterpart; write a `condition` block's cases")
        return
    def operand(value: Any) -> str:
        text = value[2:-2] if isinstance(value, str) and value.startswith("{{") \
            and value.endswith("}}") else json.dumps(str(value))
        text = f"str({text})"
        return text if g.value(node_id, "case_sensitive") in (True, "True") \
            else f"{text}.lower()"
    expression = _OPERATORS[operator].format(a=operand(left), b=operand(right))
    branches: dict[str, str] = {}
    for output in ("true_result", "false_result"):
        targets = [t for o, t, _ in g.outs[node_id] if o == output]
        if len(targets) == 1:
            branches[output] = g.ids[targets[0]]
        elif targets:
            junction = g.id_maker.make(f"{g.ids[node_id]}_{output}")
            b.add({"id": junction, "type": "set", "name": output, "after": [g.ids[node_id]],
                   "with": {"branch": output}})
            branches[output] = junction
    with_: dict[str, Any] = {"cases": [{"when": expression, "goto": branches["true_result"]}]
                             if "true_result" in branches else []}
    if "false_result" in branches:
        with_["default"] = branches["false_result"]
    message = g.field(node_id, "message", b) or left
    g.refs[node_id] = {"*": message[2:-2]} if isinstance(message, str) and \
        message.startswith("{{") else {"*": g.ids[node_id]}
    _add(g, node_id, b, "condition", with_)


def _batch(g: Graph, node_id: str, b: Builder, walk: _Walk) -> None:
    model = next((o for o, _ in g.sources(node_id, "model")), None)
    column = str(g.value(node_id, "column_name", "text"))
    child: dict[str, Any] = {"prompt": "{row}", "inputs": {"row": "{{loop.item." + column +
                                                           "}}"}}
    if g.value(node_id, "system_message"):
        child["system"] = g.field(node_id, "system_message", b)
    if model is not None:
        settings, dropped = _model(g, model)
        child.update(settings)
        b.node(g.ids[model], g.title[model], g.kind[model], f"model of {g.title[node_id]!r}",
               dropped=dropped)
    items = g.field(node_id, "df", b)
    _add(g, node_id, b, "parallel", {"for_each": items, "max_concurrency": 4},
         blocks=[{"id": "row_model", "type": "llm", "with": child}], skip=("model",))
    g.refs[node_id] = {"*": f"{g.ids[node_id]}.results"}


_HANDLERS = {
    "ChatInput": _chat_input, "TextInput": _text_input, "ChatOutput": _output,
    "TextOutput": _output, "Prompt": _prompt, "ParseData": _parse, "ParseDataFrame": _parse,
    "URL": _url, "URLComponent": _url, "ConditionalRouter": _router, "If-Else": _router,
    "BatchRunComponent": _batch,
    **{kind: _agent for kind in _AGENTS},
}
