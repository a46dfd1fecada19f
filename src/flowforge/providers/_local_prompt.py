"""What a request becomes for a local model: the plain chat messages a small
chat template reads, and the grammar its answer is written under.

A local model has no tool-calling API: the tools are listed in the system
prompt as short signatures, earlier calls and results are shown as text, and
the answer (a final `content`, or `tool_calls`) is forced by a llama.cpp
grammar built from the JSON Schema (`tool_answer_schema`).  Kept apart from
`local.py`, which loads the weights and drives the generation.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from flowforge.errors import ProviderError
from flowforge.providers.local_text import readable_result
from flowforge.providers.base import LLMRequest, Message, ToolSpec, grammar_schema

__all__ = ["grammar_text", "compiled_grammar", "tool_answer_schema", "chat_messages"]


_GRAMMARS: OrderedDict[str, Any] = OrderedDict()


def grammar_text(schema: dict[str, Any]) -> str:
    """The GBNF grammar enforcing `schema` (without the limits a grammar cannot carry)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(grammar_schema(schema), sort_keys=True))
    # llama-cpp-python's converter lets a string hold raw control characters
    # (newlines), which JSON forbids: a small model then rambles over several
    # lines inside a string and the answer does not parse.  JSON's own rule:
    return gbnf.replace('char ::= [^"\\\\] |', 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |')


def compiled_grammar(schema: dict[str, Any]) -> Any:
    """A compiled grammar for `schema`, cached (compiling costs more than a token)."""
    text = json.dumps(grammar_schema(schema), sort_keys=True)
    if text in _GRAMMARS:
        _GRAMMARS.move_to_end(text)
        return _GRAMMARS[text]
    from llama_cpp import LlamaGrammar
    try:
        grammar = LlamaGrammar.from_string(grammar_text(schema), verbose=False)
    except Exception as exc:  # the converter raises bare Exceptions on unsupported schemas
        raise ProviderError(f"this JSON Schema cannot be enforced by the local model's "
                            f"grammar: {exc}", provider="local") from None
    _GRAMMARS[text] = grammar
    if len(_GRAMMARS) > 64:
        _GRAMMARS.popitem(last=False)
    return grammar


def tool_answer_schema(tools: list[ToolSpec], tool_choice: str | None,
                       content_schema: dict[str, Any] | None = None,
                       parallel: bool = False) -> dict[str, Any]:
    """The JSON Schema of a tool-calling answer (its two shapes: `local`'s docstring)."""
    chosen = tools
    if tool_choice not in (None, "auto", "required", "none"):
        chosen = [t for t in tools if t.name == tool_choice]
        if not chosen:
            raise ProviderError(f"tool_choice names '{tool_choice}', which is not among the "
                                f"tools offered ({', '.join(t.name for t in tools)})",
                                provider="local")
    call = {"anyOf": [{"type": "object",
                       "properties": {"name": {"const": tool.name},
                                      "arguments": tool.parameters or {"type": "object"}},
                       "required": ["name", "arguments"]} for tool in chosen]}
    calls = {"type": "object",
             "properties": {"tool_calls": {"type": "array", "items": call, "minItems": 1,
                                            # a small model repeats a call until max_tokens:
                                            # one call per turn unless asked for more
                                            "maxItems": min(len(chosen), 4) if parallel else 1}},
             "required": ["tool_calls"]}
    final = {"type": "object", "properties": {"content": content_schema or {"type": "string"}},
             "required": ["content"]}
    if tool_choice == "none":
        return final
    if tool_choice is not None and tool_choice != "auto":
        return calls
    return {"anyOf": [calls, final]}


def _signature(parameters: dict[str, Any] | None) -> str:
    """`query: string (required), top_k: integer` - the grammar enforces the structure,
    so a small context is not spent on the whole JSON Schema."""
    properties = (parameters or {}).get("properties") or {}
    required = set((parameters or {}).get("required") or [])
    parts = []
    for name, schema in properties.items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind == "array":
            items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
            kind = f"array of {items.get('type') or 'values'}"
        note = " (required)" if name in required else ""
        about = schema.get("description") if isinstance(schema, dict) else None
        parts.append(f"{name}: {kind or 'value'}{note}" + (f" - {about}" if about else ""))
    return "; ".join(parts) or "none"


def _tools_prompt(tools: list[ToolSpec]) -> str:
    listed = "\n".join(f"- {t.name}: {t.description} Arguments: {_signature(t.parameters)}"
                       for t in tools)
    return ("You can call these tools:\n" + listed + "\nTo call tools, answer "
            '{"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}. '
            'When you have the final answer, answer {"content": "<your answer>"}.')


def chat_messages(request: LLMRequest) -> list[dict[str, str]]:
    """Messages as plain role/content pairs a small chat template understands."""
    extra_system = []
    if request.tools:
        # listed under "none" too: the system prompt (and so the KV cache's prefix)
        # stays the same as in the turns that may call them
        extra_system.append(_tools_prompt(request.tools))
    if request.response_format is not None:
        # the schema as it is: a shorter sketch of it (fields, types, ranges) cost
        # the router, the chat, research and build one right answer each (issue 47,
        # bench/RESULTS.md); a block may still leave out what its own prompt says
        # (the evaluator's guided schema)
        extra_system.append("Answer with JSON matching this schema: "
                            + json.dumps(request.response_format))
    out: list[dict[str, str]] = []
    calls: dict[str, dict[str, Any]] = {}
    for message in request.messages:
        for call in message.tool_calls or []:
            calls[call.id] = call.arguments or {}
        out.append({"role": message.role if message.role != "tool" else "user",
                    "content": _content_of(message, calls)})
    if extra_system:
        addition = "\n\n".join(extra_system)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{addition}".strip()
        else:
            out.insert(0, {"role": "system", "content": addition})
    return out


def _content_of(message: Message, calls: dict[str, dict[str, Any]] | None = None) -> str:
    if message.role == "tool":
        name = f" `{message.name}`" if message.name else ""
        arguments = (calls or {}).get(message.tool_call_id or "")
        return (f"Result of tool{name} (call {message.tool_call_id}):\n"
                f"{readable_result(message.content or '', arguments)}")
    if message.role == "assistant" and message.tool_calls:
        return json.dumps({"tool_calls": [{"name": c.name, "arguments": c.arguments}
                                          for c in message.tool_calls]})
    return message.content or ""
