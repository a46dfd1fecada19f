"""`function`: call a Python callable registered with `@flowforge.function`.

Async callables are awaited; plain ones are called on the event loop (fast,
for small pure functions) unless `thread: true` asks for a worker thread,
which a function that blocks on I/O or CPU must use.  A dict result is the
output as it is; any other value is wrapped as `{result: value}`."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from flowforge.blocks.base import LATER, BlockConfig, BlockContext, BlockType
from flowforge.blocks.registry import register_block
from flowforge.tools.functions import get_function


class FunctionConfig(BlockConfig):
    function: str
    """Name the callable was registered under."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments (templates allowed)."""
    thread: bool = False
    """Run a plain (non-async) callable in a worker thread instead of the event loop."""


@register_block
class FunctionBlock(BlockType):
    type_name = "function"
    Config = FunctionConfig

    @classmethod
    def is_eager(cls, config: FunctionConfig) -> bool:
        # A plain callable on the loop cannot tell whether it has a Task of its own.
        return not config.thread and not get_function(config.function).is_async

    @classmethod
    def run_now(cls, context: BlockContext, config: FunctionConfig) -> Any:
        if config.thread:
            return LATER
        registered = get_function(config.function)
        if registered.is_async:
            return LATER
        result = registered.fn(**config.args)
        return result if isinstance(result, dict) else {"result": result}

    @classmethod
    async def run(cls, context: BlockContext, config: FunctionConfig) -> Any:
        registered = get_function(config.function)
        if registered.is_async:
            result = await registered.fn(**config.args)
        elif config.thread:
            result = await asyncio.to_thread(registered.fn, **config.args)
        else:
            result = registered.fn(**config.args)
        return result if isinstance(result, dict) else {"result": result}
