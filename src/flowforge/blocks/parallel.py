"""`parallel`: map child blocks over a list, at most `max_concurrency`
items at a time. Children see `{{loop.item}}` and `{{loop.index}}`.
`output.results` lists each item's child outputs in the order of the items
(not of completion), so results line up with inputs. A failed item fails the
block, after the other items have finished, naming every failed item."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from flowforge.blocks._passes import pass_cap, too_many
from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, ChildOutcome, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import RunError
from flowforge.workflow.model import BlockSpec


class ParallelConfig(BlockConfig):
    for_each: Any
    """The list to map over, usually a template such as `{{input.topics}}`."""
    max_concurrency: int = Field(4, ge=1, le=10_000)
    """How many items run at once."""


@register_block
class ParallelBlock(BlockType):
    type_name = "parallel"
    Config = ParallelConfig
    outputs = {
        "results": Output("list", "Each item's child outputs (by child id), in the order "
                          "of the items."),
        "count": Output("integer", "How many items ran."),
    }
    container = True
    holds_slot = False

    @classmethod
    def scope_names(cls, spec: BlockSpec) -> set[str]:
        return {"loop"}

    @classmethod
    async def run(cls, context: BlockContext, config: ParallelConfig) -> Any:
        items = config.for_each
        if isinstance(items, dict):
            items = list(items.items())
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"for_each must be a list, got {type(items).__name__}")
        cap = pass_cap(context)
        if cap is not None and len(items) > cap:
            raise too_many(context, len(items), "items")
        gate = asyncio.Semaphore(config.max_concurrency)

        async def one(index: int, item: Any) -> ChildOutcome:
            async with gate:
                scope = {"loop": {"index": index, "item": item, "items": items}}
                return await context.run_children(context.node.children, scope,
                                                   f"{context.block_id}[{index}]")

        outcomes = await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))
        failures = [f"item {i}: " + "; ".join(f"{cid}: {err}" for cid, err in o.errors.items())
                    for i, o in enumerate(outcomes) if o.failed]
        if failures:
            raise RunError(f"{len(failures)} of {len(items)} item(s) failed - "
                               + " | ".join(failures))
        return {"results": [o.outputs for o in outcomes], "count": len(outcomes)}
