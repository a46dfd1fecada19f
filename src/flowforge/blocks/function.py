"""`function`: call a Python callable registered with `@flowforge.function`.

Async callables are awaited; plain ones are called on the event loop (fast,
for small pure functions) unless `thread: true` asks for a worker thread,
which a function that blocks on I/O or CPU must use.  A dict result is the
output as it is; any other value is wrapped as `{result: value}`.

A callable with an `idempotency_key` parameter receives the block's key: the
same when the block runs again after a crash or a worker's takeover, so a
side effect (a payment, an email) can be made once."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from pydantic import Field

from flowforge.blocks._toolset import tool_functions
from flowforge.blocks.base import LATER, BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import Problem
from flowforge.tools.functions import get_function, is_registered, unknown_function

__all__ = ["FunctionBlock", "FunctionConfig", "function_problems"]


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
    outputs: dict[str, Output] = {}
    more_outputs = ("Open: what the callable returns, a dict as it is, any other value as "
                    "`{result: value}`; validation does not check the fields read of it.")

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
        result = registered.fn(**_arguments(registered.fn, context, config))
        return result if isinstance(result, dict) else {"result": result}

    @classmethod
    async def run(cls, context: BlockContext, config: FunctionConfig) -> Any:
        registered = get_function(config.function)
        arguments = _arguments(registered.fn, context, config)
        if registered.is_async:
            result = await registered.fn(**arguments)
        elif config.thread:
            result = await asyncio.to_thread(registered.fn, **arguments)
        else:
            result = registered.fn(**arguments)
        return result if isinstance(result, dict) else {"result": result}


_TAKES_KEY: dict[Any, bool] = {}


def _arguments(fn: Any, context: BlockContext, config: FunctionConfig) -> dict[str, Any]:
    takes = _TAKES_KEY.get(fn)
    if takes is None:
        try:
            takes = "idempotency_key" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            takes = False
        _TAKES_KEY[fn] = takes
    if not takes or "idempotency_key" in config.args:
        return config.args
    return {**config.args, "idempotency_key": getattr(context, "idempotency_key", None)}


def function_problems(doc: Any) -> list[Problem]:
    """Every function the document calls (a `function` block's, an agent's
    tools) that this process has not registered: what its run would fail on.
    Not part of compiling: a server may enqueue runs for workers that import
    functions it does not; `flowforge validate --import` asks, as the run will."""
    problems = []
    for where, spec in doc.iter_blocks():
        called = []
        name = spec.with_.get("function") if spec.type == "function" else None
        if isinstance(name, str) and "{{" not in name:
            called.append((f"{where}.with.function", name))
        called += [(f"{where}.with.{at}", name)
                   for at, name in tool_functions(spec.with_.get("tools"))
                   if spec.type == "agent"]
        problems += [Problem(at, unknown_function(name)) for at, name in called
                     if not is_registered(name)]
    return problems
