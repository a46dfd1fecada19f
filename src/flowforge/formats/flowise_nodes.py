"""The Flowise chatflow node table: chains and agents become blocks, the
sub-nodes wired into them are folded in (`convert`).

Flowise fills a prompt's variables from `promptValues` (`{{question}}` is the
chat message, `{{llmChain_0.data.instance}}` another chain's answer) and
gives the first variable left unfilled the chat message; the `llm` block's
`inputs` say the same.  A vector store's documents, splitters and
embeddings are the knowledge base to create; the store is searched by a
`knowledge_search` tool.
"""

from __future__ import annotations

import json
from typing import Any

from flowforge.formats._flowgraph import Builder, slug
from flowforge.formats._flowparts import GENERIC_INSTEAD, SEARCH_TOOLS, calculator_tool, \
    llm_prompt, model_fields, number, prompt_vars, search_tool
from flowforge.formats.flowise import Graph, instances, parse_list

__all__ = ["convert", "model_settings"]

_QUESTION = "{{input.query}}"
_SUB_CATEGORIES = {"Chat Models", "LLMs", "Prompts", "Memory", "Tools", "Output Parsers",
                   "Embeddings", "Vector Stores", "Document Loaders", "Text Splitters",
                   "Retrievers", "Moderation", "Cache", "Tools (MCP)"}
_AGENTS = {"toolAgent", "conversationalAgent", "openAIToolAgent", "openAIFunctionAgent",
           "mrklAgentChat", "reactAgentChat", "toolAgentLlamaIndex"}
_RETRIEVAL = {"conversationalRetrievalQAChain", "retrievalQAChain"}


def _category(g: Graph, node_id: str) -> str:
    return str(g.nodes[node_id]["data"].get("category") or "")


def _absorb(g: Graph, b: Builder, node_id: str, became: str,
            dropped: list[str] | None = None) -> None:
    if g.ids[node_id] not in {entry.id for entry in b.report.nodes}:
        b.node(g.ids[node_id], g.title[node_id], g.kind[node_id], became, dropped=dropped)


def model_settings(vendor_word: str, config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`model`, `temperature`, `max_tokens` from a chat model's inputs."""
    given = (number(config.get(key)) for key in ("maxTokens", "maxOutputTokens",
                                                  "maxTokensToSample"))
    tokens = [value for value in given if isinstance(value, int) and value > 0]   # the last
    return model_fields(
        vendor_word, config.get("customModelName") or config.get("modelName")
        or config.get("model"), config.get("temperature"), tokens[-1] if tokens else None,
        config.get("basepath") or config.get("baseUrl") or config.get("overrideEndpoint"))


def _model(g: Graph, node_id: str, b: Builder, with_: dict[str, Any]) -> None:
    for model in g.subs(node_id, "model"):
        settings, dropped = model_settings(g.kind[model], g.inputs(model))
        with_.update(settings)
        _absorb(g, b, model, f"model of {g.title[node_id]!r}", dropped)


def _values(g: Graph, prompt: str) -> dict[str, Any]:
    """A prompt node's variables: `{{question}}` -> the chat message, a node's
    instance -> its answer, text as written."""
    values = parse_list(g.input(prompt, "promptValues", {}))
    out: dict[str, Any] = {}
    for name, value in (values.items() if isinstance(values, dict) else []):
        if isinstance(value, str) and value.strip() in ("{{question}}", "{{ question }}"):
            out[name] = _QUESTION
        elif instances(value):
            origin = instances(value)[0]
            out[name] = "{{" + g.refs[origin] + "}}" if origin in g.refs else ""
        else:
            out[name] = value
    return out


def _prompt(g: Graph, node_id: str, b: Builder, with_: dict[str, Any]) -> None:
    """The chain's prompt node(s) as `prompt`, `system` and `inputs`."""
    prompts = g.subs(node_id, "prompt")
    if not prompts:
        with_["prompt"] = _QUESTION
        return
    prompt = prompts[0]
    values = _values(g, prompt)
    human = str(g.input(prompt, "humanMessagePrompt") or g.input(prompt, "template") or "")
    system = str(g.input(prompt, "systemMessagePrompt") or "")
    unfilled = [name for name in prompt_vars(system + "\n" + human) if name not in values]
    if unfilled:                        # Flowise gives the first one the chat message
        values[unfilled[0]] = _QUESTION
    with_["prompt"], inputs = llm_prompt(human, values)
    if system:
        with_["system"], more = llm_prompt(system, values)
        if with_["system"] == "{prompt}":
            with_["system"], more = "{system}", {"system": more["prompt"]}
        inputs.update(more)
    if inputs:
        with_["inputs"] = inputs
    _absorb(g, b, prompt, f"prompt of {g.title[node_id]!r}")


def _schema(g: Graph, node_id: str, b: Builder) -> tuple[dict[str, Any] | None, list[str]]:
    from flowforge.formats._zod import ZodError, zod_schema

    for parser in g.subs(node_id, "outputParser"):
        kind = g.kind[parser]
        if kind == "structuredOutputParser":
            rows = parse_list(g.input(parser, "jsonStructure", []))
            properties = {str(row.get("property")): {"type": row.get("type") or "string",
                                                     "description": row.get("description", "")}
                          for row in rows if isinstance(row, dict) and row.get("property")}
            _absorb(g, b, parser, f"output schema of {g.title[node_id]!r}")
            return {"type": "object", "properties": properties,
                    "required": list(properties)}, []
        if kind == "advancedStructuredOutputParser":
            try:
                schema = zod_schema(str(g.input(parser, "exampleJson", "")))
            except ZodError as exc:
                _absorb(g, b, parser, f"output schema of {g.title[node_id]!r}",
                        [f"exampleJson: its Zod schema could not be read ({exc}); write it as "
                         f"`output_schema` (JSON Schema)"])
                return None, []
            _absorb(g, b, parser, f"output schema of {g.title[node_id]!r}",
                    ["autofixParser: flowforge repairs an invalid answer once"]
                    if g.input(parser, "autofixParser") else [])
            if schema.get("type") != "object":
                schema = {"type": "object", "properties": {"output": schema},
                          "required": ["output"]}
            return schema, []
        _absorb(g, b, parser, f"output of {g.title[node_id]!r}",
                [f"{kind}: flowforge returns the text; give the block an `output_schema`"])
    return None, []


def _memory(g: Graph, node_id: str, b: Builder, with_: dict[str, Any]) -> None:
    for memory in g.subs(node_id, "memory"):
        b.inputs.setdefault("session_id", {"type": "string", "default": "default",
                                           "description": "The conversation's id"})
        with_["conversation"] = "{{input.session_id}}"
        window = number(g.input(memory, "k"))
        if isinstance(window, int) and window > 0:
            with_["memory_window"] = 2 * window
        kind = g.kind[memory]
        _absorb(g, b, memory, f"conversation of {g.title[node_id]!r}",
                [] if kind in ("bufferMemory", "bufferWindowMemory") else
                [f"storage: flowforge keeps the history in its own store, not {kind}"])


def _add(g: Graph, node_id: str, b: Builder, type_: str, with_: dict[str, Any],
         dropped: list[str] | None = None) -> None:
    b.add({"id": g.ids[node_id], "type": type_, "name": g.title[node_id],
           "description": g.description(node_id), "after": g.after(node_id), "with": with_},
          g.position(node_id))
    b.node(g.ids[node_id], g.title[node_id], g.kind[node_id], type_, dropped=dropped)
    g.blocked.add(node_id)


def _chain(g: Graph, node_id: str, b: Builder) -> None:
    with_: dict[str, Any] = {}
    _prompt(g, node_id, b, with_)
    _model(g, node_id, b, with_)
    schema, dropped = _schema(g, node_id, b)
    if schema:
        with_["output_schema"] = schema
    if g.kind[node_id] == "conversationChain":
        _memory(g, node_id, b, with_)
        if g.input(node_id, "systemMessagePrompt"):
            with_["system"] = str(g.input(node_id, "systemMessagePrompt"))
    if g.input(node_id, "inputModeration"):
        dropped.append("inputModeration: add a `guardrail` block before it")
    _add(g, node_id, b, "agent" if "conversation" in with_ else "llm", with_, dropped)
    g.refs[node_id] = g.ids[node_id] if schema else f"{g.ids[node_id]}.content"


def _knowledge_base(g: Graph, store: str, b: Builder) -> str:
    for key in ("pineconeIndex", "collectionName", "indexName", "tableName", "basePath",
                "qdrantCollection"):
        value = g.input(store, key)
        if isinstance(value, str) and value.strip():
            kb = slug(value.strip().rstrip("/").rsplit("/", 1)[-1])
            break
    else:
        kb = slug(g.title[store])
    b.knowledge_base(kb)
    for embeddings in g.subs(store, "embeddings"):
        _absorb(g, b, embeddings, f"embeddings of knowledge base {kb!r}",
                ["embedding model: the knowledge base's own"])
    stack = list(g.subs(store, "document"))
    while stack:
        origin = stack.pop()
        _absorb(g, b, origin, f"documents of knowledge base {kb!r}",
                [f"ingestion: load the documents with `flowforge kb add {kb} FILES` (the base "
                 f"chunks and embeds them itself)"])
        stack += [o for field in ("textSplitter", "document") for o in g.subs(origin, field)]
    return kb


def _retrieval(g: Graph, node_id: str, b: Builder) -> None:
    with_: dict[str, Any] = {"prompt": _QUESTION}
    _model(g, node_id, b, with_)
    tools = []
    for store in g.subs(node_id, "vectorStoreRetriever"):
        kb = _knowledge_base(g, store, b)
        options: dict[str, Any] = {"knowledge_base": kb}
        if isinstance(number(g.input(store, "topK")), int):
            options["top_k"] = number(g.input(store, "topK"))
        tools.append({"knowledge_search": options, "name": "search_documents",
                      "description": "Search the documents for passages about the question"})
        _absorb(g, b, store, f"knowledge_search tool of {g.title[node_id]!r}")
    response = str(g.input(node_id, "responsePrompt") or
                   "Use the following pieces of context to answer the question.\n{context}")
    with_["system"] = response.replace("{context}", "(the passages the `search_documents` "
                                                    "tool returns)") \
        .replace("{question}", "(the user's question)").replace("{chat_history}", "")
    if tools:
        with_["tools"] = tools
        with_["required_tools"] = ["search_documents"]
    dropped = []
    if g.kind[node_id] == "conversationalRetrievalQAChain":
        b.inputs.setdefault("session_id", {"type": "string", "default": "default",
                                           "description": "The conversation's id"})
        with_["conversation"] = "{{input.session_id}}"
        _memory(g, node_id, b, with_)
        if g.input(node_id, "rephrasePrompt"):
            dropped.append("rephrasePrompt: the agent sees the conversation and writes its own "
                           "search query")
    _add(g, node_id, b, "agent", with_, dropped)
    g.refs[node_id] = f"{g.ids[node_id]}.content"


def _tool(g: Graph, tool: str, agent: str, b: Builder) -> dict[str, Any] | None:
    kind = g.kind[tool]
    owner = f"of {g.title[agent]!r}"
    if kind.lower() in SEARCH_TOOLS:
        entry, dropped = search_tool(kind)
        _absorb(g, b, tool, f"web_search tool {owner}", dropped)
        return entry
    if kind == "calculator":
        _absorb(g, b, tool, f"calculator tool {owner}")
        return calculator_tool()
    if kind == "retrieverTool":
        stores = g.subs(tool, "retriever")
        if stores:
            kb = _knowledge_base(g, stores[0], b)
            _absorb(g, b, stores[0], f"knowledge base {kb!r}")
            _absorb(g, b, tool, f"knowledge_search tool {owner}")
            return {"knowledge_search": {"knowledge_base": kb},
                    "name": slug(str(g.input(tool, "name") or "search"), "search"),
                    "description": str(g.input(tool, "description") or g.title[tool])}
    if kind == "requestsGet" and isinstance(g.input(tool, "url"), str):
        _absorb(g, b, tool, f"http tool {owner}")
        return {"http": {"url": g.input(tool, "url"), "method": "GET"},
                "name": slug(str(g.input(tool, "name") or "requests_get"), "request"),
                "description": str(g.input(tool, "description") or g.title[tool])}
    return None


def _agent(g: Graph, node_id: str, b: Builder) -> None:
    with_: dict[str, Any] = {"prompt": _QUESTION}
    if g.input(node_id, "systemMessage"):
        with_["system"] = str(g.input(node_id, "systemMessage"))
    _model(g, node_id, b, with_)
    tools, failed = [], []
    for tool in g.subs(node_id, "tools"):
        entry = _tool(g, tool, node_id, b)
        (tools if entry else failed).append(entry or tool)
    if tools:
        with_["tools"] = tools
    _memory(g, node_id, b, with_)
    if isinstance(number(g.input(node_id, "maxIterations")), int):
        with_["max_iterations"] = number(g.input(node_id, "maxIterations"))
    _add(g, node_id, b, "agent", with_)
    g.refs[node_id] = f"{g.ids[node_id]}.content"
    for tool in failed:
        instead = ("rewrite its JavaScript as an inline Python `code` block or a registered "
                   "function" if g.kind[tool] in ("customTool", "customFunction")
                   else GENERIC_INSTEAD)
        b.unsupported(g.ids[tool], g.title[tool], g.kind[tool],
                      f"a tool of {g.title[node_id]!r} with no counterpart: {instead}; then "
                      f"list it in the agent's `tools:`", g.position(tool),
                      after=[g.ids[node_id]])


def convert(g: Graph, b: Builder) -> None:
    b.inputs["query"] = {"type": "string", "description": "The chat message (Flowise's question)"}
    for node_id in g.order():
        kind = g.kind[node_id]
        if kind in _AGENTS:
            _agent(g, node_id, b)
        elif kind in _RETRIEVAL:
            _retrieval(g, node_id, b)
        elif kind in ("llmChain", "conversationChain"):
            _chain(g, node_id, b)
    reported = {entry.id for entry in b.report.nodes}
    for node_id in g.order():
        if g.ids[node_id] in reported:
            continue
        served = next((target for target, _ in g.outs[node_id]), None) or next(
            (other for other in g.nodes if node_id in
             [o for v in g.inputs(other).values() for o in instances(v)]), None)
        if _category(g, node_id) in _SUB_CATEGORIES and served:
            instead = (f"it serves {g.title[served]!r}, which has no counterpart; "
                       f"{GENERIC_INSTEAD}")
        else:
            instead = json.dumps(g.kind[node_id]) + f" ({_category(g, node_id) or 'node'}): " \
                + GENERIC_INSTEAD
        b.unsupported(g.ids[node_id], g.title[node_id], g.kind[node_id], instead,
                      g.position(node_id), after=g.after(node_id),
                      description=g.description(node_id))
        g.blocked.add(node_id)
        g.refs[node_id] = g.ids[node_id]
