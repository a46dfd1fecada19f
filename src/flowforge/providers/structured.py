"""Structured answers: JSON extraction, schema validation, one repair.

Models wrap JSON in prose or markdown fences, so `extract_json` tries the
whole text, then a fenced block, then the first balanced object or array.
`ask_structured` sends the JSON Schema as the request's `response_format`
(a local model is then grammar-constrained), checks the answer, and when it
does not parse or validate, shows the model its answer and the exact error
once and asks again; a second bad answer is a `StructuredAnswerError`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable


from flowforge.providers.base import LLMResponse, Message
from flowforge.workflow.schema_check import schema_problems

__all__ = ["extract_json", "schema_problems", "ask_structured", "StructuredAnswerError", "repair_message",
           "parse_against", "schema_fields"]

_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class StructuredAnswerError(ValueError):
    """The model's answer still did not fit after the repair attempt."""

    def __init__(self, message: str, answer: str):
        super().__init__(message)
        self.answer = answer


def extract_json(text: str) -> Any:
    """The JSON value in `text` (plain, fenced in markdown, or embedded in prose)."""
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for block in _FENCE_RE.findall(text):
        try:
            return json.loads(block.strip())
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    for index, char in enumerate(text):
        if char in "{[":
            try:
                value, _end = decoder.raw_decode(text, index)
            except json.JSONDecodeError:
                continue
            return value
    raise ValueError("no JSON value found in the text" + (
        f" (it starts with {stripped[:80]!r})" if stripped else " (it is empty)"))


def parse_against(schema: dict[str, Any] | None, text: str) -> Any:
    """Extract JSON from `text` and validate it; ValueError says what is wrong."""
    value = extract_json(text)
    problems = schema_problems(schema, value)
    if problems:
        raise ValueError("; ".join(problems))
    return value


def repair_message(error: str, schema: dict[str, Any] | None) -> Message:
    text = f"Your previous answer could not be used: {error}."
    if schema:
        text += (" Answer again with only a JSON value that matches this JSON Schema "
                 f"(no other text): {json.dumps(schema, ensure_ascii=False)}")
    return Message("user", text)


async def ask_structured(call: Callable[..., Any], messages: list[Message],
                         schema: dict[str, Any] | None, *,
                         parse: Callable[[str], Any] | None = None, repairs: int = 1,
                         **options: Any) -> tuple[Any, LLMResponse, list[Message]]:
    """Ask until the answer parses (at most `repairs` extra tries).

    Returns (value, last response, the messages including the answer)."""
    parse = parse or (lambda text: parse_against(schema, text))
    messages = list(messages)
    for attempt in range(repairs + 1):
        response: LLMResponse = await call(messages, response_format=schema,
                                           purpose="answer" if attempt == 0 else "repair",
                                           **options)
        messages.append(Message("assistant", response.text))
        try:
            return parse(response.text), response, messages
        except ValueError as exc:
            error = str(exc)
            if attempt == repairs:
                raise StructuredAnswerError(
                    f"the model's answer was invalid after {repairs} repair attempt(s): {error}; "
                    f"answer: {response.text[:300]!r}", response.text) from None
            messages.append(repair_message(error, schema))
    raise AssertionError("unreachable")


def schema_fields(schema: Any) -> set[str] | None:
    """The fields an answer to `schema` has: its properties when it lists them
    and does not allow others (`additionalProperties: true`); else None."""
    if not isinstance(schema, dict) or schema.get("additionalProperties") is True:
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties or \
            schema.get("type", "object") != "object":
        return None
    return set(properties)
