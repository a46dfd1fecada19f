"""What surrounds a block's `run`: its config checked once templates are
resolved, its `timeout` and `retry` policy, its failure's message.

Cancellation and suspension pass straight through: they are signals, not
failures to retry."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from pydantic import ValidationError

from flowforge.blocks.base import Suspend
from flowforge.errors import BlockError, BlockTimeout, FlowforgeError
from flowforge.workflow.config_errors import format_loc
from flowforge.workflow.graph import Node

__all__ = ["run_guarded", "message_of", "validate_config", "shown_inputs"]


def validate_config(node: Node, resolved: Any) -> Any:
    """The block's config from its resolved `with:`; what does not fit fails
    the block, located, once templates are resolved."""
    try:
        return node.info.Config.model_validate(resolved)
    except ValidationError as exc:
        details = "; ".join(f"{format_loc(tuple(e['loc']), 'with')}: {e['msg']}"
                            for e in exc.errors())
        raise BlockError(node.id, node.type, f"invalid configuration after "
                         f"resolving templates: {details}") from None


def shown_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """A block's inputs as its `block_started` event shows them: its own
    provider key goes to the provider, not the record."""
    if "api_key" in inputs and inputs["api_key"]:
        return {**inputs, "api_key": "***"}
    return inputs


async def run_guarded(node: Node, context: Any, config: Any, bus: Any) -> Any:
    """Run with the block's timeout and retry policy; each retry is announced
    on `bus` as `block_retrying`."""
    policy = node.retry
    attempts = policy.attempts if policy else 1
    for attempt in range(1, attempts + 1):
        try:
            if node.timeout is None:
                return await node.info.run(context, config)
            try:
                return await asyncio.wait_for(node.info.run(context, config), node.timeout)
            except asyncio.TimeoutError:
                raise BlockTimeout(node.id, node.type,
                                   f"timed out after {node.timeout:g}s") from None
        except (asyncio.CancelledError, Suspend):
            raise
        except Exception as exc:  # noqa: BLE001 - retried, then reported
            if attempt >= attempts:
                raise
            delay = min(policy.backoff * (2 ** (attempt - 1)), policy.max_backoff)
            delay += delay * policy.jitter * random.random()
            bus.publish("block_retrying", node.id, attempt=attempt,
                        error=message_of(exc), delay=round(delay, 3))
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def message_of(exc: BaseException) -> str:
    """A block's failure as its record and events say it."""
    if isinstance(exc, BlockError):
        return exc.message
    if isinstance(exc, FlowforgeError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
