"""n8n's AI nodes (`@n8n/n8n-nodes-langchain.*`) and their sub-nodes.

An agent, chain, extractor, summarizer or classifier is one block; the
language model, memory, tools and output parser wired into it are folded
into that block (a model string, a conversation, tool entries, a JSON
Schema) and reported as such.  A tool without a counterpart stays visible
as an `unsupported` block placed after its agent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.formats._flowgraph import Builder, model_string, slug

__all__ = ["HANDLERS"]

_DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-sonnet-20240620",
                   "googlegemini": "gemini-1.5-flash", "ollama": "llama3.2",
                   "mistralcloud": "mistral-small-latest", "groq": "llama3-8b-8192",
                   "openrouter": "openai/gpt-4o-mini", "deepseek": "deepseek-chat"}
_EXTRACT_SYSTEM = ("You are an expert extraction algorithm. Only extract relevant information "
                   "from the text. If you do not know the value of an attribute asked to "
                   "extract, you may omit the attribute's value.")
_SUMMARY_PROMPT = 'Write a concise summary of the following:\n\n"{text}"\n\nCONCISE SUMMARY:'


def _value(value: Any) -> Any:
    return value.get("value") if isinstance(value, dict) and "__rl" in value else value


def _absorb(flow: Any, b: Builder, sub: str, became: str, dropped: list[str] | None = None
            ) -> None:
    b.node(flow.ids[sub], sub, flow.nodes[sub]["type"], became, dropped=dropped)


def _subs(flow: Any, name: str, kind: str) -> list[str]:
    return flow.subs[name].get(kind, [])


def model_settings(flow: Any, name: str, b: Builder) -> dict[str, Any]:
    """`model`, `temperature`, `max_tokens` from the node's language model."""
    found: dict[str, Any] = {}
    for index, sub in enumerate(_subs(flow, name, "ai_languageModel")):
        node = flow.nodes[sub]
        params = node.get("parameters") or {}
        match = re.match(r"^(?:lmChat|lm)(\w+)$", node["type"].rsplit(".", 1)[-1])
        vendor = match.group(1).lower() if match else ""
        dropped: list[str] = []
        if index:
            _absorb(flow, b, sub, f"unused model of {name!r}",
                    ["a second model (n8n's fallback): add it to `fallback:`"])
            continue
        model = _value(params.get("model") or params.get("modelName"))
        if not model:
            model = _DEFAULT_MODELS.get(vendor)
            dropped.append(f"model: not set in the file; n8n's default {model!r} assumed")
        written = model_string(vendor, model)
        if written is None:
            dropped.append(f"model {model!r}: flowforge has no provider for {vendor!r}; the "
                           f"block uses the default model until `model:` is set")
        else:
            found["model"] = written
        options = params.get("options") or {}
        if isinstance(options.get("temperature"), (int, float)):
            found["temperature"] = options["temperature"]
        tokens = options.get("maxTokens") or options.get("maxTokensToSample") or \
            options.get("maxOutputTokens")
        if isinstance(tokens, int) and tokens > 0:
            found["max_tokens"] = tokens
        dropped += [f"options.{key}" for key in options
                    if key not in ("temperature", "maxTokens", "maxTokensToSample",
                                   "maxOutputTokens")]
        _absorb(flow, b, sub, f"model of {name!r}", dropped)
    return found


def _schema_types(schema: Any) -> Any:
    """n8n examples write `{"name": "string"}` where JSON Schema wants
    `{"name": {"type": "string"}}`: read the short form as meant."""
    if isinstance(schema, str) and schema in ("string", "number", "integer", "boolean",
                                              "object", "array"):
        return {"type": schema}
    if isinstance(schema, dict):
        out = dict(schema)
        if isinstance(out.get("properties"), dict):
            out["properties"] = {key: _schema_types(value)
                                 for key, value in out["properties"].items()}
        if "items" in out:
            out["items"] = _schema_types(out["items"])
        return out
    return schema


def infer_schema(example: Any) -> dict[str, Any]:
    """A JSON Schema for an example value (n8n's "generate from JSON example")."""
    if isinstance(example, dict):
        return {"type": "object", "properties": {key: infer_schema(value)
                                                 for key, value in example.items()}}
    if isinstance(example, list):
        return {"type": "array", "items": infer_schema(example[0]) if example else {}}
    if isinstance(example, bool):
        return {"type": "boolean"}
    if isinstance(example, (int, float)):
        return {"type": "number"}
    return {"type": "string"}


def _parse_schema(params: dict[str, Any], where: str, b: Builder) -> dict[str, Any] | None:
    kind = params.get("schemaType")
    text = params.get("inputSchema") if kind == "manual" else \
        params.get("jsonSchemaExample") if kind == "fromJson" else \
        params.get("jsonSchema") or params.get("inputSchema")
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError as exc:
        b.note(f"{where!r}: its JSON schema is not valid JSON ({exc.msg}); no schema was set")
        return None
    if not isinstance(value, dict):
        return None
    return infer_schema(value) if kind == "fromJson" else _schema_types(value)


def output_schema(flow: Any, name: str, b: Builder) -> dict[str, Any] | None:
    for sub in _subs(flow, name, "ai_outputParser"):
        kind = flow.nodes[sub]["type"].rsplit(".", 1)[-1]
        params = flow.nodes[sub].get("parameters") or {}
        if kind == "outputParserAutofixing":
            for model in _subs(flow, sub, "ai_languageModel"):
                _absorb(flow, b, model, f"model of {sub!r}", ["a repair model: flowforge asks "
                                                               "the block's own model once"])
            _absorb(flow, b, sub, f"output schema of {name!r}")
            return output_schema(flow, sub, b)
        if kind == "outputParserItemList":
            _absorb(flow, b, sub, f"output schema of {name!r}")
            return {"type": "array", "items": {"type": "string"}}
        schema = _parse_schema(params, sub, b)
        _absorb(flow, b, sub, f"output schema of {name!r}")
        return schema
    return None


def _with_schema(flow: Any, name: str, with_: dict[str, Any], key: str,
                 schema: dict[str, Any] | None, view_fields: dict[str, str]) -> None:
    block_id = flow.ids[name]
    if schema is None:
        return
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {"output": schema}, "required": ["output"]}
        view_fields["output"] = f"{block_id}.output"
    else:
        view_fields["output"] = block_id
    with_[key] = schema


def _prompt(flow: Any, name: str, params: dict[str, Any], b: Builder, auto: str) -> Any:
    if params.get("promptType") == "define" or "promptType" not in params and "text" in params:
        return flow.text(params.get("text", ""), name, b)
    if "prompt" in params and "promptType" not in params:
        return flow.text(params["prompt"], name, b)
    return flow.text(auto, name, b)


def _llm_block(flow: Any, name: str, b: Builder, prompt: Any, system: Any,
               schema: dict[str, Any] | None, fields: dict[str, str],
               became: str = "llm", dropped: list[str] | None = None) -> None:
    from flowforge.formats.n8n_nodes import View, base

    with_: dict[str, Any] = {"prompt": "{prompt}", "inputs": {"prompt": prompt}}
    if system:
        with_["system"] = "{system}"
        with_["inputs"]["system"] = system
    with_.update(model_settings(flow, name, b))
    view = View(fields=dict(fields))
    _with_schema(flow, name, with_, "output_schema", schema, view.fields)
    node = flow.nodes[name]
    b.add(base(flow, name, "llm", with_), node.get("position"))
    b.node(flow.ids[name], name, node["type"], became, dropped=dropped)
    flow.views[name] = view


def _chain_llm(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    auto = "={{ $json.input }}" if (flow.nodes[name].get("typeVersion") or 1) < 1.4 \
        else "={{ $json.chatInput }}"
    system = []
    dropped = []
    for message in (params.get("messages") or {}).get("messageValues") or []:
        if message.get("type", "SystemMessagePromptTemplate") == "SystemMessagePromptTemplate":
            system.append(flow.text(message.get("message", ""), name, b))
        else:
            dropped.append(f"message of type {message.get('type')}: write it into the prompt")
    block_id = flow.ids[name]
    _llm_block(flow, name, b, _prompt(flow, name, params, b, auto), "\n\n".join(system),
               output_schema(flow, name, b), {"text": f"{block_id}.content"}, dropped=dropped)


def _extractor(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    if params.get("schemaType", "fromAttributes") == "fromAttributes":
        properties, required = {}, []
        for entry in (params.get("attributes") or {}).get("attributes") or []:
            key = entry.get("name")
            if key:
                properties[key] = {"type": entry.get("type") or "string",
                                   "description": entry.get("description", "")}
                if entry.get("required"):
                    required.append(key)
        schema: dict[str, Any] | None = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
    else:
        schema = _parse_schema(params, name, b)
    system = (params.get("options") or {}).get("systemPromptTemplate") or _EXTRACT_SYSTEM
    _llm_block(flow, name, b, flow.text(params.get("text", ""), name, b),
               flow.text(system, name, b), schema, {})


def _summarize(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    origin = flow.input_of(name)
    text = "{{" + flow.ids[origin] + "}}" if origin in flow.ids else ""
    dropped = []
    for sub in _subs(flow, name, "ai_document"):
        _absorb(flow, b, sub, f"input of {name!r}", ["document loading and splitting: "
                                                     "flowforge summarizes the input in one "
                                                     "call"])
        for splitter in _subs(flow, sub, "ai_textSplitter"):
            _absorb(flow, b, splitter, f"input of {name!r}", ["text splitting"])
    prompts = ((params.get("options") or {}).get("summarizationMethodAndPrompts") or {})
    custom = (prompts.get("values") or {}).get("prompt") or \
        (prompts.get("values") or {}).get("combineMapPrompt")
    block_id = flow.ids[name]
    _llm_block(flow, name, b, text, None, None,
               {"response.text": f"{block_id}.content", "output.text": f"{block_id}.content",
                "text": f"{block_id}.content"}, dropped=dropped)
    block = b.blocks[-1]
    block["with"]["prompt"] = custom if isinstance(custom, str) and "{text}" in custom \
        else _SUMMARY_PROMPT
    block["with"]["inputs"] = {"text": block["with"]["inputs"]["prompt"]}


def _openai(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    from flowforge.formats.n8n_nodes import SAAS_INSTEAD, unsupported

    resource = params.get("resource", "text" if "langchain" in flow.nodes[name]["type"]
                          else "chat")
    if resource not in ("text", "chat") or params.get("operation") not in (None, "message",
                                                                            "complete"):
        unsupported(flow, name, b, f"OpenAI {resource} {params.get('operation')}: "
                                   f"{SAAS_INSTEAD}")
        return
    messages = (params.get("messages") or {}).get("values") or \
        (params.get("prompt") or {}).get("messages") or []
    system = [flow.text(m.get("content", ""), name, b) for m in messages
              if m.get("role") == "system"]
    prompt = [flow.text(m.get("content", ""), name, b) for m in messages
              if m.get("role") != "system"]
    model = _value(params.get("modelId") or params.get("model")) or "gpt-4o-mini"
    block_id = flow.ids[name]
    _llm_block(flow, name, b, "\n\n".join(str(p) for p in prompt), "\n\n".join(system), None,
               {"message.content": f"{block_id}.content", "text": f"{block_id}.content",
                "content": f"{block_id}.content"})
    b.blocks[-1]["with"]["model"] = f"openai/{model}"


def _classifier(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    from flowforge.formats.n8n_nodes import View, base, branch

    node = flow.nodes[name]
    categories = [(str(entry.get("category", "")), str(entry.get("description", "")))
                  for entry in (params.get("categories") or {}).get("categories") or []]
    options = params.get("options") or {}
    if options.get("fallback") == "other":
        categories.append(("Other", "None of the other categories fits"))
    names = ", ".join(category for category, _ in categories)
    system = str(options.get("systemPromptTemplate") or
                 "Please classify the text provided by the user into one of the following "
                 "categories: {categories}.").lstrip("=").replace("{categories}", names)
    lines = [f"- {category}: {description}" for category, description in categories]
    text = flow.text(params.get("inputText", ""), name, b)
    with_: dict[str, Any] = {"prompt": f"{system}\n\nCategories:\n" + "\n".join(lines) +
                             f"\n\nText to classify:\n{text}"}
    with_.update(model_settings(flow, name, b))
    dropped = [f"options.{key}" for key in options
               if key not in ("fallback", "systemPromptTemplate")]
    b.add(base(flow, name, "router", with_), node.get("position"))
    for index, (category, description) in enumerate(categories):
        branch(flow, name, index, category, b, description, always=True)
    b.node(flow.ids[name], name, node["type"], "router", dropped=dropped)
    flow.views[name] = View(passes=True)


def _knowledge_base(params: dict[str, Any], fallback: str) -> str:
    for key in ("pineconeIndex", "qdrantCollection", "tableName", "memoryKey", "indexName",
                "collection"):
        value = _value(params.get(key))
        if isinstance(value, str) and value and not value.startswith("="):
            return slug(value)
    return slug(fallback)


def _tool_entry(flow: Any, agent: str, tool: str, b: Builder) -> dict[str, Any] | None:
    from flowforge.formats.n8n_nodes import workflow_reference

    node = flow.nodes[tool]
    kind = node["type"].rsplit(".", 1)[-1]
    params = node.get("parameters") or {}
    name = slug(params.get("name") or params.get("toolName") or tool, "tool")
    description = params.get("description") or params.get("toolDescription") or tool
    if kind == "toolWorkflow":
        reference = workflow_reference(params)
        if reference is None:
            return None
        b.note(f"{tool!r} calls the n8n workflow {reference!r}: import it too")
        _absorb(flow, b, tool, f"workflow tool of {agent!r}",
                [f"field {entry.get('name')!r}: the agent fills the workflow's inputs"
                 for entry in (params.get("fields") or {}).get("values") or []])
        return {"workflow": reference, "name": name, "description": description}
    stores = _subs(flow, tool, "ai_vectorStore") if kind == "toolVectorStore" else \
        [tool] if kind.startswith("vectorStore") and params.get("mode") == "retrieve-as-tool" \
        else None
    if stores:
        store = stores[0]
        kb = _knowledge_base(flow.nodes[store].get("parameters") or {}, store)
        b.knowledge_base(kb)
        for embedding in _subs(flow, store, "ai_embedding"):
            _absorb(flow, b, embedding, f"embeddings of knowledge base {kb!r}",
                    ["embedding model: the knowledge base's own"])
        for model in _subs(flow, tool, "ai_languageModel"):
            _absorb(flow, b, model, f"model of {tool!r}", ["the tool hands passages to the "
                                                            "agent's model directly"])
        if store != tool:
            _absorb(flow, b, store, f"knowledge base {kb!r}")
        _absorb(flow, b, tool, f"knowledge_search tool of {agent!r}")
        entry: dict[str, Any] = {"knowledge_search": {"knowledge_base": kb}, "name": name,
                                 "description": description}
        if isinstance(params.get("topK"), int):
            entry["knowledge_search"]["top_k"] = params["topK"]
        return entry
    if kind in ("toolHttpRequest", "httpRequestTool") and isinstance(params.get("url"), str) \
            and not params["url"].startswith("="):
        _absorb(flow, b, tool, f"http tool of {agent!r}")
        return {"http": {"url": params["url"], "method": str(params.get("method", "GET"))},
                "name": name, "description": description}
    if kind == "toolSerpApi":
        _absorb(flow, b, tool, f"web_search tool of {agent!r}",
                ["SerpAPI: flowforge searches with `backend: offline | perplexity | tavily`; "
                 "set `web_search.backend`"])
        return {"web_search": {}}
    if kind == "mcpClientTool" and (params.get("sseEndpoint") or params.get("endpointUrl")):
        _absorb(flow, b, tool, f"mcp tool of {agent!r}")
        return {"mcp": {"url": params.get("endpointUrl") or params["sseEndpoint"]}}
    return None


def _agent(flow: Any, name: str, params: dict[str, Any], b: Builder) -> None:
    from flowforge.formats.n8n_nodes import View, base, instead_for

    node = flow.nodes[name]
    options = params.get("options") or {}
    with_: dict[str, Any] = {"prompt": _prompt(flow, name, params, b, "={{ $json.chatInput }}")}
    if options.get("systemMessage"):
        with_["system"] = flow.text(options["systemMessage"], name, b)
    with_.update(model_settings(flow, name, b))
    tools, failed = [], []
    for tool in _subs(flow, name, "ai_tool"):
        entry = _tool_entry(flow, name, tool, b)
        if entry is None:
            failed.append(tool)
        else:
            tools.append(entry)
    if tools:
        with_["tools"] = tools
    for memory in _subs(flow, name, "ai_memory"):
        mparams = flow.nodes[memory].get("parameters") or {}
        key = mparams.get("sessionKey") if mparams.get("sessionIdType") == "customKey" \
            else "={{ $json.sessionId }}"
        with_["conversation"] = flow.text(key, memory, b)
        with_["memory_window"] = 2 * int(mparams.get("contextWindowLength") or 5)
        kind = flow.nodes[memory]["type"].rsplit(".", 1)[-1]
        _absorb(flow, b, memory, f"conversation of {name!r}",
                [] if kind == "memoryBufferWindow" else
                [f"storage: flowforge keeps the history in its own store, not {kind}"])
    view = View(fields={"output": f"{flow.ids[name]}.content"})
    _with_schema(flow, name, with_, "response_format", output_schema(flow, name, b),
                 view.fields)
    dropped = [f"options.{key}" for key in options if key != "systemMessage"]
    b.add(base(flow, name, "agent", with_), node.get("position"))
    b.node(flow.ids[name], name, node["type"], "agent", dropped=dropped)
    flow.views[name] = view
    for tool in failed:
        b.unsupported(flow.ids[tool], tool, flow.nodes[tool]["type"],
                      f"a tool of {name!r} with no counterpart: {instead_for(flow.nodes[tool])}"
                      f"; then list it in the agent's `tools:`", flow.nodes[tool].get("position"),
                      after=[flow.ids[name]])


HANDLERS = {"agent": _agent, "chainLlm": _chain_llm, "informationExtractor": _extractor,
            "chainSummarization": _summarize, "textClassifier": _classifier,
            "openAi": _openai}
