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
are left alone.  Only the author's text is a template: what a `{{...}}`
brings in (an answer, a web page) is never read for placeholders, so a
fetched `{word}` cannot fail the run or pull in an input.  A placeholder with
no input is a `validate` problem naming it (with did-you-mean).  This is
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

from flowforge.blocks._llm import (USAGE_OUTPUTS, LLMBlockConfig, ModelCalls,
                                   choose_model, setting)
from flowforge.blocks.base import BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, Problem
from flowforge.providers.base import Message
from flowforge.providers.structured import StructuredAnswerError, ask_structured, schema_fields
from flowforge.hints import did_you_mean
from flowforge.workflow.model import BlockSpec
from flowforge.workflow.templates import TEMPLATE_RE, compile_value, has_templates, \
    interpolate_value

__all__ = ["LLMBlock", "LLMConfig", "render_prompt", "render_written", "placeholders",
           "written_placeholders"]

_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


def placeholders(template: str) -> list[str]:
    """Names of the `{placeholder}` fields of a template, in order, once each."""
    return list(dict.fromkeys(_PLACEHOLDER_RE.findall(template)))


def written_placeholders(text: str) -> list[str]:
    """The placeholders of the author's own text: those outside its
    `{{...}}` templates (a template's inner `{a.b}` is not one)."""
    return placeholders(TEMPLATE_RE.sub(" ", text))


def _walk(value: Any, parts: list[str], name: str) -> Any:
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(name)
    return value


def render_prompt(template: str, inputs: dict[str, Any]) -> str:
    """Fill `{name}` fields from `inputs`; KeyError names a missing one.
    One pass: the text an input brings in is not read again."""

    def value_of(match: re.Match) -> str:
        path = match.group(1).split(".")
        if path[0] not in inputs:
            raise KeyError(path[0])
        value = _walk(inputs[path[0]], path[1:], match.group(1))
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, default=str)

    return _PLACEHOLDER_RE.sub(value_of, template)


def render_written(written: str, inputs: dict[str, Any], scope: Any) -> str:
    """The prompt from the text as the author wrote it: placeholders are
    filled in the author's text only, and each `{{...}}` is resolved from
    `scope` as the engine resolves it, so what it brings in stays inert."""
    out: list[str] = []
    last = 0
    for match in TEMPLATE_RE.finditer(written):
        out.append(render_prompt(written[last:match.start()], inputs))
        resolve = compile_value(match.group(0))
        out.append(interpolate_value(resolve(scope) if resolve is not None else match.group(0)))
        last = match.end()
    out.append(render_prompt(written[last:], inputs))
    return "".join(out)


class LLMConfig(LLMBlockConfig):
    prompt: str
    """Template with `{placeholder}` fields filled from `inputs`."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """Values for the placeholders (templates allowed)."""
    system: str | None = None
    """System prompt (placeholders filled too)."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of the answer; its fields become the block's outputs."""
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
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        """Every placeholder of the author's text has an input: the run
        would fail on one that has not (and on a path a literal input lacks)."""
        inputs = spec.with_.get("inputs", {})
        if not isinstance(inputs, dict):
            return []                 # one template for all inputs: known at run time
        problems = []
        for field in ("prompt", "system"):
            text = spec.with_.get(field)
            if not isinstance(text, str):
                continue
            for name in written_placeholders(text):
                root, *path = name.split(".")
                if root not in inputs:
                    problems.append(Problem(
                        f"{where}.with.{field}",
                        f"the placeholder {{{name}}} has no value{did_you_mean(root, inputs)}: "
                        f"add `{root}` to `inputs` (given: {', '.join(inputs) or 'none'})"))
                    continue
                if path and not has_templates(inputs[root]):
                    try:
                        _walk(inputs[root], path, name)
                    except KeyError:
                        problems.append(Problem(
                            f"{where}.with.{field}",
                            f"the placeholder {{{name}}} reads `{'.'.join(path)}`, which "
                            f"`inputs.{root}` does not have"))
        return problems

    @classmethod
    async def run(cls, context: BlockContext, config: LLMConfig) -> Any:
        node = getattr(context, "node", None)
        written = node.spec.with_ if getattr(node, "type", None) == cls.type_name else {}

        def fill(field: str, resolved: str) -> str:
            text = written.get(field)
            if isinstance(text, str) and has_templates(text):
                return render_written(text, config.inputs, context.scope)
            return render_prompt(resolved, config.inputs)

        try:
            prompt = fill("prompt", config.prompt)
            system = fill("system", config.system) if config.system else None
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
