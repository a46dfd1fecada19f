"""`parser`: pull a JSON value out of text and check it against a schema.

    - id: fields
      type: parser
      with:
        text: "{{draft.content}}"          # plain JSON, ```json fenced```, or JSON in prose
        schema: {type: object, properties: {order_id: {type: string}}, required: [order_id]}

The prompt-chain ParserNode: the first JSON value found (the whole text,
then a fenced block, then the first balanced object or array) is validated
against `schema`; a text with no JSON, or a value that breaks the schema,
fails the block with every problem listed (`default` instead makes it the
output).  Output: `data` (the value) and, when it is an object, its fields
spread as top-level outputs (`{{fields.order_id}}`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from flowforge.blocks._structured import extract_json, schema_problems
from flowforge.blocks.base import BlockConfig, BlockContext, BlockType
from flowforge.blocks.registry import register_block
from flowforge.errors import BlockError

__all__ = ["ParserBlock", "ParserConfig"]

class ParserConfig(BlockConfig):
    text: Any
    """Text holding the JSON (a dict or list is taken as already parsed)."""
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    """JSON Schema the value must match."""
    default: Any = None
    """Output `data` when the text holds no valid value (instead of failing)."""


@register_block
class ParserBlock(BlockType):
    """Extracts JSON (also from markdown) and validates it against a schema."""

    type_name = "parser"
    Config = ParserConfig

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        return True

    @classmethod
    async def run(cls, context: BlockContext, config: ParserConfig) -> Any:
        return cls.run_now(context, config)

    @classmethod
    def run_now(cls, context: BlockContext, config: ParserConfig) -> Any:
        try:
            value = config.text if isinstance(config.text, (dict, list)) else \
                extract_json(config.text if isinstance(config.text, str) else str(config.text))
            problems = schema_problems(config.schema_, value)
            if problems:
                raise ValueError("the value does not match the schema: " + "; ".join(problems))
        except ValueError as exc:
            if "default" in config.model_fields_set:
                value = config.default
            else:
                raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        if isinstance(value, dict):
            return {**value, "data": value}
        return {"data": value}
