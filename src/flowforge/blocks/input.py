"""`input`: the trigger. Its output is the run's validated inputs, the same
values every block reads as `{{input.*}}` whether or not this block exists,
plus `timestamp` (ISO 8601, UTC: when the run started) as the block-executor
contract has it, unless an input is itself named `timestamp`."""

from __future__ import annotations

from typing import Any

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block


class InputConfig(BlockConfig):
    """The input block takes no settings: inputs are declared in `inputs:`."""


@register_block
class InputBlock(BlockType):
    type_name = "input"
    pure = True                  # nothing outside the run sees it run
    Config = InputConfig
    outputs = {
        "timestamp": Output("string", "When the run started (ISO 8601, UTC), unless an "
                            "input is itself named `timestamp`."),
    }
    more_outputs = ("Every input the document declares under `inputs:`, validated, by name; "
                    "without `inputs:` the output is open (the inputs pass through as given).")

    @classmethod
    def output_fields(cls, spec: Any, doc: Any) -> set[str] | None:
        # Undeclared inputs pass through as given: then any field may come.
        return set(doc.inputs) | {"timestamp"} if doc.inputs else None

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        return True

    @classmethod
    def run_now(cls, context: BlockContext, config: InputConfig) -> Any:
        from datetime import datetime, timezone

        values = dict(context.scope.get("input") or {})
        values.setdefault("timestamp", datetime.now(timezone.utc).isoformat(
            timespec="milliseconds"))
        return values

    @classmethod
    async def run(cls, context: BlockContext, config: InputConfig) -> Any:
        return cls.run_now(context, config)
