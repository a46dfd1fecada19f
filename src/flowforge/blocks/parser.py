"""`parser`: pull a JSON value out of text and check it against a schema.

    - id: fields
      type: parser
      with:
        text: "{{draft.content}}"          # plain JSON, ```json fenced```, or JSON in prose
        schema: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
        # or, as prompt-chain definitions write it:  schema: '{"order_id": "String"}'

The prompt-chain ParserNode: the first JSON value found (the whole text,
then a fenced block, then the first balanced object or array) is validated
against `schema`; a text with no JSON, or a value that breaks the schema,
fails the block with every problem listed, the schema as written and the
start of what came back (`default` instead makes it the output).  `schema`
is JSON Schema, or the prompt-chain notation as a string (`workflow.notation`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, Problem
from flowforge.providers.structured import extract_json, schema_problems
from flowforge.workflow.notation import NotationError, notation_to_schema
from flowforge.workflow.safe_regex import pattern_problems

__all__ = ["ParserBlock", "ParserConfig"]

class ParserConfig(BlockConfig):
    text: Any
    """Text holding the JSON (a dict or list is taken as already parsed)."""
    schema_: dict[str, Any] | str | None = Field(None, alias="schema")
    """JSON Schema the value must match, or the prompt-chain notation as a string:
    `{"character": "Array<String>"}` (String, Number, Integer, Boolean, Object, Any,
    Array<T>, nested objects; a key ending in `?` is optional)."""
    default: Any = None
    """Output `data` when the text holds no valid value (instead of failing)."""


@register_block
class ParserBlock(BlockType):
    """Extracts JSON (also from markdown) and validates it against a schema."""

    type_name = "parser"
    Config = ParserConfig
    outputs = {"data": Output("any", "The JSON value found, as validated.")}
    more_outputs = ("When the value is an object, its fields are also top-level outputs "
                    "(`{{fields.order_id}}`): the output is open, and validation does not "
                    "check the fields read of it.")

    @classmethod
    def check(cls, spec: Any, where: str, known_ids: set[str]) -> list[Problem]:
        schema = spec.with_.get("schema")
        if isinstance(schema, str) and "{{" not in schema:
            try:
                notation_to_schema(schema)
            except NotationError as exc:
                return [Problem(f"{where}.with.schema", str(exc))]
        if isinstance(schema, dict):
            return pattern_problems(schema, f"{where}.with.schema")    # patterns run on RE2
        return []

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        return True

    @classmethod
    async def run(cls, context: BlockContext, config: ParserConfig) -> Any:
        return cls.run_now(context, config)

    @classmethod
    def run_now(cls, context: BlockContext, config: ParserConfig) -> Any:
        schema = config.schema_
        try:
            if isinstance(schema, str):
                schema = notation_to_schema(schema)
        except NotationError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        try:
            value = config.text if isinstance(config.text, (dict, list)) else \
                extract_json(config.text if isinstance(config.text, str) else str(config.text))
            problems = schema_problems(schema, value)
            if problems:
                raise ValueError("the value does not match the schema: " + "; ".join(problems)
                                 + f"; schema: {_shown(config.schema_)}; got: {_shown(value)}")
        except ValueError as exc:
            if "default" in config.model_fields_set:
                value = config.default
            else:
                raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        if isinstance(value, dict):
            return {**value, "data": value}
        return {"data": value}


def _shown(value: Any, limit: int = 300) -> str:
    """A value for an error message: as written (a string as is), cut at `limit`."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                             default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
