"""Small helpers the engine tests share."""

from __future__ import annotations

from typing import Any

import flowforge


async def run_doc(blocks: list[dict], inputs: dict | None = None, **extra: Any):
    doc = {"id": "t", **extra, "blocks": blocks}
    return await flowforge.run(doc, inputs or {}, storage=False)


def statuses(result) -> dict[str, str]:
    return {bid: record.status for bid, record in result.blocks.items()}
