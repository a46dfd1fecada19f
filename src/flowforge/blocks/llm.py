"""`llm`: one prompt template, filled from named inputs, optionally structured.

    - id: summarize
      type: llm
      with:
        prompt: "Summarize for a {audience}: {text}"
        inputs: {audience: customer, text: "{{answer.content}}"}
        output_schema: {type: object, properties: {summary: {type: string}},
                        required: [summary]}

`{placeholder}` fields (Python-format style; `{a.b}` reads into a mapping)
are filled from `inputs`; other braces, such as JSON examples in the prompt,
are left alone.  A placeholder with no input is an error naming it.  This is
the shape of the block registry's LLM blocks and of the prompt-chain
PromptNode: with an `output_schema` the answer is JSON validated against it
(one repair) and its fields are the block's outputs; without one the output
is `content`.  `model`, `tokens` and `cost` are always added.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field

from flowforge.blocks._llm import (API_KEY_DOC, USAGE_OUTPUTS, LLMBlockConfig, ModelCalls,
                                   choose_model, setting)
from flowforge.blocks._structured import StructuredAnswerError, ask_structured, schema_fields
from flowforge.blocks.base import BlockContext, BlockType, Output
from flowforge.blocks.registry import register_block
from flowforge.errors import BlockError
from flowforge.providers.base import Message

__all__ = ["LLMBlock", "LLMConfig", "render_prompt", "placeholders"]

_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


def placeholders(template: str) -> list[str]:
    """Names of the `{placeholder}` fields of a template, in order, once each."""
    return list(dict.fromkeys(_PLACEHOLDER_RE.findall(template)))


def render_prompt(template: str, inputs: dict[str, Any]) -> str:
    """Fill `{name}` fields from `inputs`; KeyError names a missing one."""

    def value_of(match: re.Match) -> str:
        path = match.group(1).split(".")
        if path[0] not in inputs:
            raise KeyError(path[0])
        value: Any = inputs[path[0]]
        for part in path[1:]:
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise KeyError(match.group(1))
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, default=str)

    return _PLACEHOLDER_RE.sub(value_of, template)


class LLMConfig(LLMBlockConfig):
    prompt: str
    """Template with `{placeholder}` fields filled from `inputs`."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """Values for the placeholders (templates allowed)."""
    system: str | None = None
    """System prompt (placeholders filled too)."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of the answer; its fields become the block's outputs."""
    model: str | None = None
    """Model string (default: `defaults.model`, else the default model)."""
    api_key: str | None = Field(None, description=API_KEY_DOC)
    fallback: list[str] | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    stream: bool | None = None
    """Stream text as `llm_delta` events (default: `defaults.stream`, else false)."""


@register_block
class LLMBlock(BlockType):
    """A prompt template filled from inputs; structured output by JSON Schema."""

    type_name = "llm"
    seed_fields = {"systemPrompt": "system", "userPrompt": "prompt"}
    Config = LLMConfig
    outputs = {
        "content": Output("string", "The model's answer (with `output_schema`, its JSON)."),
        **USAGE_OUTPUTS,
    }
    more_outputs = ("With an `output_schema`, the answer's fields are also top-level "
                    "outputs (`{{summarize.summary}}`).")

    @classmethod
    def output_fields(cls, spec: Any, doc: Any) -> set[str] | None:
        usage = {"content", "model", "tokens", "cost"}
        schema = spec.with_.get("output_schema")
        if schema is None:
            return usage
        fields = schema_fields(schema)
        return None if fields is None else usage | fields

    @classmethod
    async def run(cls, context: BlockContext, config: LLMConfig) -> Any:
        try:
            prompt = render_prompt(config.prompt, config.inputs)
            system = render_prompt(config.system, config.inputs) if config.system else None
        except KeyError as exc:
            raise BlockError(context.block_id, cls.type_name,
                             f"the prompt's placeholder {{{exc.args[0]}}} has no value; add "
                             f"it to `inputs` (given: {', '.join(config.inputs) or 'none'})"
                             ) from None
        calls = ModelCalls(context, choose_model(context, config.model),
                           fallback=tuple(setting(context, config.fallback, "fallback", ()) or ()),
                           stream=bool(setting(context, config.stream, "stream", False)),
                           api_key=config.api_key, config=config)
        messages = ([Message("system", system)] if system else []) + [Message("user", prompt)]
        options = {"temperature": setting(context, config.temperature, "temperature"),
                   "max_tokens": setting(context, config.max_tokens, "max_tokens")}
        if config.output_schema is None:
            response = await calls(messages, **options)
            return {"content": response.text, **calls.usage()}
        try:
            value, response, _ = await ask_structured(calls, messages, config.output_schema,
                                                      **options)
        except StructuredAnswerError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        fields = value if isinstance(value, dict) else {"value": value}
        return {"content": response.text, **fields, **calls.usage()}
