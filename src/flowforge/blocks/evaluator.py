"""`evaluator`: a model scores content against named metrics.

    - id: grade
      type: evaluator
      with:
        content: "{{answer.content}}"
        metrics:
          - {name: Accuracy, description: Correct per the refund policy, range: [0, 10]}
          - {name: Completeness, description: Answers every part of the question, range: [0, 10]}

The metrics become a strict JSON Schema (one number per metric, keyed by the
lower-cased name with non-alphanumerics as `_`: `Response Time` ->
`response_time`; minimum and maximum from the range; no other fields), sent
as the response format at temperature 0.1 (an embedded model, held to it by a
grammar, is not told the JSON form in words).  A score that is missing, not a
number or outside its range is shown to the model with the error once; a
second bad answer fails the block.

"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flowforge.blocks._llm import (USAGE_OUTPUTS, LLMBlockConfig, ModelCalls,
                                   choose_model, setting)
from flowforge.blocks.base import BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError
from flowforge.providers.base import Message
from flowforge.providers.structured import StructuredAnswerError, ask_structured

__all__ = ["EvaluatorBlock", "EvaluatorConfig", "Metric", "metric_key", "metrics_schema"]


class Metric(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """Shown to the model; its lower-case form is the output field."""
    description: str = ""
    """What a high score means."""
    range: tuple[float, float] = (0, 10)
    """[min, max] of the score (or `{min: 0, max: 10}`, the seed's form)."""

    @field_validator("range", mode="before")
    @classmethod
    def _min_max_form(cls, value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"min", "max"}:
            return (value["min"], value["max"])
        return value

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        if value[0] > value[1]:
            raise ValueError(f"range [{value[0]:g}, {value[1]:g}] must be [min, max]")
        return value


class EvaluatorConfig(LLMBlockConfig):
    content: Any
    """What to evaluate (text; other values are shown as JSON)."""
    metrics: list[Metric] = Field(min_length=1)
    """Metrics `{name, description, range: [min, max]}`."""
    system: str | None = None
    """Extra instructions added to the evaluation prompt."""
    temperature: float = Field(0.1, ge=0, le=2)
    """0.1 by default: the same content should get the same scores."""


_RESERVED = {"content", "evaluation", "model", "tokens", "cost"}


def metric_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_") or "score"


def metrics_schema(metrics: list[Metric], described: bool = True) -> dict[str, Any]:
    """The answer's schema.  Not `described` for a model with `guided_answers`: the
    system prompt lists the metrics already, and the schema is shown to such a
    model in its prompt too (`_local_prompt.chat_messages`): described, the
    demo's grader read every description twice (~60 tokens, ~1 s on two cores)."""
    properties = {}
    for metric in metrics:
        low, high = metric.range
        score = properties[metric_key(metric.name)] = {"type": "number", "minimum": low,
                                                        "maximum": high}
        if described:
            score["description"] = f"{metric.description} (score from {low:g} to {high:g})".strip()
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _shown(content: Any) -> str:
    """The content as the model reads it: objects, and text that is a JSON
    object or list, pretty-printed alike; any other text as it is."""
    if isinstance(content, str):
        stripped = content.strip()
        if not stripped.startswith(("{", "[")):
            return content
        try:
            content = json.loads(stripped)
        except ValueError:
            return content
    return json.dumps(content, ensure_ascii=False, indent=2, default=str)


def _prompt(config: EvaluatorConfig, content: str, compact: bool = False) -> str:
    """The system prompt.  `compact` (a model with `guided_answers`, the embedded
    ones, whose answer a grammar holds to the schema) leaves out the sentence about
    the answer's JSON form: ~40 tokens, ~1 s on two cores, that the grammar says."""
    lines = "\n".join(f"- {metric_key(m.name)}: {m.name} - {m.description} "
                      f"(a number from {m.range[0]:g} to {m.range[1]:g})" for m in config.metrics)
    extra = f"\n{config.system}\n" if config.system else ""
    form = "" if compact else (
        "\n- Answer with only a JSON object whose keys are the lower-case metric keys below "
        "and whose values are the scores; no explanations, no other fields, no text before or "
        "after the JSON.")
    return (
        "You are an objective evaluation agent. Score the content below on each metric.\n"
        f"- Give every metric a numeric score within its range.{form}{extra}\n"
        f"Metrics:\n{lines}\n\nContent to evaluate:\n{content}")


@register_block
class EvaluatorBlock(BlockType):
    """A model scores content on named metrics, each within its range."""

    type_name = "evaluator"
    seed_fields = {"systemPrompt": "system", "userPrompt": "prompt"}
    Config = EvaluatorConfig
    outputs = {
        "content": Output("string", "The content that was evaluated."),
        "evaluation": Output("string", "The model's answer, its JSON object of scores, "
                             "whole."),
        **USAGE_OUTPUTS,
    }
    more_outputs = ("Each metric's score is a top-level field named by its key "
                    "(`Accuracy` -> `{{grade.accuracy}}`).")

    @classmethod
    def check(cls, spec: Any, where: str, known_ids: set[str]) -> list:
        from flowforge.errors import Problem

        metrics = spec.with_.get("metrics")
        if not isinstance(metrics, list):
            return []
        keys = [metric_key(m["name"]) for m in metrics
                if isinstance(m, dict) and isinstance(m.get("name"), str)]
        clashes = sorted({k for k in keys if keys.count(k) > 1})
        problems = [Problem(f"{where}.with.metrics", f"two metrics have the key '{k}'; "
                            f"rename one") for k in clashes]
        problems += [Problem(f"{where}.with.metrics", f"a metric cannot be named '{k}' (an "
                             f"output field of the evaluator); rename it")
                     for k in sorted(set(keys) & _RESERVED)]
        return problems

    @classmethod
    def output_fields(cls, spec: Any, doc: Any) -> set[str] | None:
        metrics = spec.with_.get("metrics")
        if not isinstance(metrics, list) or not all(
                isinstance(m, dict) and isinstance(m.get("name"), str) for m in metrics):
            return None                      # templated metrics: known only at run time
        return _RESERVED | {metric_key(m["name"]) for m in metrics}

    @classmethod
    async def run(cls, context: BlockContext, config: EvaluatorConfig) -> Any:
        content = _shown(config.content)
        calls = ModelCalls(context, choose_model(context, config.model),
                           fallback=tuple(setting(context, config.fallback, "fallback", ()) or ()),
                           api_key=config.api_key, config=config)
        guided = calls.guided()
        schema = metrics_schema(config.metrics, described=not guided)
        messages = [Message("system", _prompt(config, content, guided)),
                    Message("user", "Evaluate the content given in the system prompt. "
                                    "Return only the JSON object of metric scores.")]
        try:
            scores, response, _ = await ask_structured(
                calls, messages, schema, temperature=config.temperature,
                max_tokens=setting(context, config.max_tokens, "max_tokens"))
        except StructuredAnswerError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        # The block-executor contract: `content` is what was evaluated; the
        # model's own JSON answer is kept whole in `evaluation`.
        return {"content": content, "evaluation": response.text, **scores, **calls.usage()}
