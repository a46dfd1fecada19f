"""`set`: its output is its `with` mapping, resolved. The simplest way to
name a value for later blocks, to shape a response, or to write a per-user
memory key (`memory: [last_topic]` saves the output field `last_topic`).

Its config allows any field, on purpose: the fields *are* the outputs."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block


class SetConfig(BlockConfig):
    """Any fields; each becomes an output field of the same name."""

    model_config = ConfigDict(extra="allow")


@register_block
class SetBlock(BlockType):
    type_name = "set"
    pure = True                  # nothing outside the run sees it run
    Config = SetConfig
    outputs: dict[str, Output] = {}
    more_outputs = "Each field of its `with`, resolved, by name (`{{calc.label}}`)."

    @classmethod
    def output_fields(cls, spec: Any, doc: Any) -> set[str] | None:
        return set(spec.with_)

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        return True

    @classmethod
    def run_now(cls, context: BlockContext, config: SetConfig) -> Any:
        return dict(config.model_extra or {})

    @classmethod
    async def run(cls, context: BlockContext, config: SetConfig) -> Any:
        return cls.run_now(context, config)
