"""A new block type needs no change to the engine: a Config model and `run`
(plus `run_now` when it can answer without waiting) and one decorator."""

from __future__ import annotations

import asyncio
from typing import Any

import flowforge
from flowforge.blocks.base import LATER, BlockConfig, BlockContext, BlockType
from flowforge.blocks.type_table import register_block
from tests.engine.helpers import run_doc, statuses

CALLS: list[str] = []


class ShoutConfig(BlockConfig):
    text: str
    times: int = 1


@register_block
class ShoutBlock(BlockType):
    """Awaits, so it always goes through `run`."""

    type_name = "test_shout"
    Config = ShoutConfig

    @classmethod
    async def run(cls, context: BlockContext, config: ShoutConfig) -> Any:
        await asyncio.sleep(0)
        CALLS.append("run")
        return {"text": (config.text.upper() + "!") * config.times}


class MaybeNowConfig(BlockConfig):
    value: int


@register_block
class MaybeNowBlock(BlockType):
    """Answers at once for small values; big ones take the awaited path."""

    type_name = "test_maybe_now"
    Config = MaybeNowConfig

    @classmethod
    def run_now(cls, context: BlockContext, config: MaybeNowConfig) -> Any:
        if config.value < 0:
            raise ValueError("negative values are refused")
        if config.value > 100:
            return LATER
        CALLS.append("run_now")
        return {"double": config.value * 2}

    @classmethod
    async def run(cls, context: BlockContext, config: MaybeNowConfig) -> Any:
        await asyncio.sleep(0)
        CALLS.append("run")
        return {"double": config.value * 2}


async def test_a_registered_block_type_runs_and_feeds_later_blocks():
    CALLS.clear()
    result = await run_doc([
        {"id": "shout", "type": "test_shout", "with": {"text": "hi", "times": 2}},
        {"id": "small", "type": "test_maybe_now", "with": {"value": 4}},
        {"id": "big", "type": "test_maybe_now", "with": {"value": 400}},
        {"id": "out", "type": "set", "with": {"all": "{{shout.text}} {{small.double}} "
                                                     "{{big.double}}"}}])
    assert result.status == "succeeded"
    assert result.results["out"] == {"all": "HI!HI! 8 800"}
    assert sorted(CALLS) == ["run", "run", "run_now"]


async def test_a_failure_in_run_now_fails_the_block_with_its_message():
    result = await run_doc([{"id": "neg", "type": "test_maybe_now", "with": {"value": -1}}])
    assert statuses(result) == {"neg": "failed"}
    assert "negative values are refused" in result.error


async def test_a_custom_block_config_is_checked_at_validation():
    try:
        flowforge.load({"id": "bad", "blocks": [
            {"id": "shout", "type": "test_shout", "with": {"txt": "hi"}}]})
    except flowforge.ValidationFailed as exc:
        text = str(exc)
    else:
        raise AssertionError("an unknown field must be refused")
    assert "blocks[0].with" in text and "txt" in text
