"""`guardrail`: is a text grounded in its reference context? (hallucination check)

    - id: check
      type: guardrail
      with:
        content: "{{answer.content}}"
        context: "{{search.results}}"     # text, or a list of passages / {content} results
        # or: knowledge_base: policies, query: "{{input.query}}", top_k: 5
        threshold: 3                       # pass when score >= threshold (0-10)
        fail_on_reject: true               # optional: a failed check fails the block
      on_error: review                     # ... and then on_error runs

The model rates, at temperature 0, how well the reference context supports
the text: a score from 0 (contradicted or invented) to 10 (fully supported),
with its reasoning, as JSON `{score, reasoning}` (schema-constrained; one
repair).

Decision: as in the block executor this comes from, a failed check is an
answer, not an error: by default the block succeeds with `passed: false`, and
a `condition` routes on `{{check.passed}}` (the seed's documents branch on
it).  With `fail_on_reject: true` a failed check FAILS the block, with the
score and reasoning in the error, so `on_error: <block>` routes the run to a
fallback.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import Any

from pydantic import Field, model_validator

from flowforge.blocks._llm import (USAGE_OUTPUTS, LLMBlockConfig, ModelCalls,
                                   choose_model, setting)
from flowforge.blocks._toolset import ToolEntry, build_tools, tool_context
from flowforge.blocks.base import BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError
from flowforge.providers.base import Message
from flowforge.providers.structured import StructuredAnswerError, ask_structured

__all__ = ["GuardrailBlock", "GuardrailConfig", "GROUNDING_SCHEMA"]

GROUNDING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 10},
                   "reasoning": {"type": "string"}},
    "required": ["score", "reasoning"], "additionalProperties": False}


class GuardrailConfig(LLMBlockConfig):
    content: str
    """The text to check (e.g. an agent's answer)."""
    context: Any = None
    """Reference context: text, a list of passages, or knowledge results (`{content}` items)."""
    knowledge_base: str | None = None
    """Fetch the context from this knowledge base instead (with `query`)."""
    query: str | None = None
    """Search query for `knowledge_base`."""
    top_k: int = Field(5, ge=1, le=100)
    """How many passages to fetch from `knowledge_base`."""
    threshold: float = Field(3, ge=0, le=10)
    """Pass when the score (0-10) is at least this."""
    fail_on_reject: bool = False
    """Fail the block when the check does not pass (default: succeed with `passed: false`)."""
    temperature: float = Field(0.0, ge=0, le=2)
    """0 by default: the same text and context should get the same score."""

    @model_validator(mode="after")
    def _has_reference(self) -> GuardrailConfig:
        if self.context is None and self.knowledge_base is None:
            raise ValueError("give the reference: `context` (text or passages) or "
                             "`knowledge_base` with `query`")
        if self.knowledge_base is not None and not self.query:
            raise ValueError("`knowledge_base` needs a `query`")
        return self


def _passages(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        for key in ("content", "text", "context"):
            if isinstance(value.get(key), str):
                return [value[key]]
        for key in ("results", "documents", "passages"):
            if isinstance(value.get(key), list):
                return _passages(value[key])
        return [json.dumps(value, ensure_ascii=False, default=str)]
    if isinstance(value, list):
        return [text for item in value for text in _passages(item)]
    return [str(value)]


async def _from_knowledge(context: BlockContext, config: GuardrailConfig) -> list[str]:
    entry = ToolEntry(knowledge_search={"knowledge_base": config.knowledge_base,
                                        "top_k": config.top_k})
    async with AsyncExitStack() as stack:
        tools = await build_tools([entry], context, stack)
        tool = next(iter(tools.values()))
        found = await tool.execute({"query": config.query}, tool_context(context))
    return _passages(found)


def _prompt(passages: list[str], content: str) -> str:
    reference = "\n\n".join(f"[{i + 1}] {text}" for i, text in enumerate(passages))
    return (
        "You are a hallucination detector. Compare the text to check with the reference "
        "context and rate how well the context supports it.\n"
        "Score from 0 to 10: 0-2 the text contradicts the context or is invented; 3-4 mostly "
        "unsupported; 5-6 partly supported; 7-8 mostly supported; 9-10 fully supported.\n"
        "Answer with only a JSON object {\"score\": <number 0-10>, \"reasoning\": "
        "\"<one or two sentences>\"}.\n\n"
        f"Reference context:\n{reference or '(empty)'}\n\nText to check:\n{content}")


@register_block
class GuardrailBlock(BlockType):
    """Checks that a text is supported by its reference context."""

    type_name = "guardrail"
    Config = GuardrailConfig
    outputs = {
        "passed": Output("boolean", "True when `score` >= `threshold`."),
        "score": Output("number", "How well the context supports the text, 0 to 10."),
        "reasoning": Output("string", "The model's reasons for the score."),
        "threshold": Output("number", "The threshold the score was held to."),
        **USAGE_OUTPUTS,
    }

    @classmethod
    async def run(cls, context: BlockContext, config: GuardrailConfig) -> Any:
        passages = _passages(config.context)
        if config.knowledge_base is not None:
            try:
                passages += await _from_knowledge(context, config)
            except Exception as exc:  # noqa: BLE001 - reported as the block's failure
                raise BlockError(context.block_id, cls.type_name,
                                 f"knowledge_base '{config.knowledge_base}': {exc}") from None
        calls = ModelCalls(context, choose_model(context, config.model),
                           fallback=tuple(setting(context, config.fallback, "fallback", ()) or ()),
                           api_key=config.api_key, config=config)
        messages = [Message("system", _prompt(passages, config.content)),
                    Message("user", "Rate the text against the reference context. "
                                    "Return only the JSON object.")]
        try:
            verdict, _response, _ = await ask_structured(
                calls, messages, GROUNDING_SCHEMA, temperature=config.temperature,
                max_tokens=setting(context, config.max_tokens, "max_tokens"))
        except StructuredAnswerError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        score = verdict["score"]
        passed = score >= config.threshold
        if not passed and config.fail_on_reject:
            raise BlockError(context.block_id, cls.type_name,
                             f"hallucination check failed: score {score:g} is below the "
                             f"threshold {config.threshold:g}: {verdict['reasoning']}")
        return {"passed": passed, "score": score, "reasoning": verdict["reasoning"],
                "threshold": config.threshold, **calls.usage()}
