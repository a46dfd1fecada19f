"""Helpers the LLM block tests share: scripted models and one-call runs."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Iterator

import flowforge
from flowforge.blocks._llm import sent_requests
from flowforge.providers.scripted import register_script, unregister_script

_names = itertools.count()


@contextlib.contextmanager
def scripted(script: Any) -> Iterator[str]:
    """Register `script` (a function or rules dict) and yield its model string."""
    name = f"test_{next(_names)}"
    register_script(name, script)
    try:
        yield f"scripted/{name}"
    finally:
        unregister_script(name)


async def run_blocks(blocks: list[dict], inputs: dict | None = None, *,
                     declare: dict | None = None, **run: Any):
    """Run a one-off workflow; `declare` is its `inputs:` section."""
    doc = {"id": "t", "blocks": blocks}
    if declare:
        doc["inputs"] = declare
    for key in ("defaults", "variables"):
        if key in run:
            doc[key] = run.pop(key)
    return await flowforge.run(doc, inputs or {}, storage=run.pop("storage", False), **run)


def statuses(result) -> dict[str, str]:
    return {bid: record.status for bid, record in result.blocks.items()}


def events(result, kind: str, block: str | None = None) -> list[dict]:
    return [e for e in result.events if e["type"] == kind
            and (block is None or e.get("block_id") == block)]


def requests(result, block: str) -> list[dict]:
    """Every request a block sent, rebuilt whole from the run's events."""
    return sent_requests(result.events, block)
