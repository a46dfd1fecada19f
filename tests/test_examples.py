"""Every example in examples/ runs and does what its comment says."""

from __future__ import annotations

from pathlib import Path

import pytest

import flowforge

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("inputs, message, statuses", [
    ({"amount": 1500}, "Order for guest: manual review",
     {"assess": "succeeded", "gate": "succeeded", "review": "succeeded", "approve": "skipped",
      "reply": "succeeded"}),
    ({"amount": 20, "customer": "zed"}, "Order for zed: approved",
     {"assess": "succeeded", "gate": "succeeded", "review": "skipped", "approve": "succeeded",
      "reply": "succeeded"}),
])
async def test_branch_join(inputs, message, statuses):
    result = await flowforge.run(EXAMPLES / "branch_join.yaml", inputs, storage=False)
    assert result.outputs["reply"]["message"] == message
    assert {k: r.status for k, r in result.blocks.items()} == statuses


@pytest.mark.parametrize("step, passes, passed", [(0.25, 3, True), (0.05, 5, False)])
async def test_loop_until(step, passes, passed):
    result = await flowforge.run(EXAMPLES / "loop_until.yaml", {"step": step}, storage=False)
    assert result.outputs["result"]["data"] == {"passed": passed, "passes": passes}


async def test_parallel_map_keeps_item_order():
    result = await flowforge.run(EXAMPLES / "parallel_map.yaml",
                                 {"topics": ["a", "bb", "ccc", "dddd"]}, storage=False)
    data = result.outputs["digest"]["data"]
    assert [item["headline"]["length"] for item in data] == [1, 2, 3, 4]
    assert data[2]["headline"]["title"] == "#2: What you need to know about ccc"


@pytest.mark.parametrize("vip, message", [(True, "Good day, Ada. Welcome back."),
                                          (False, "Hi Ada! Welcome back.")])
async def test_nested(vip, message):
    result = await flowforge.run(EXAMPLES / "nested.yaml", {"customer": "Ada", "vip": vip},
                                 storage=False)
    assert result.outputs["reply"]["message"] == message
    nested_started = [e for e in result.events if e["type"] == "block_started"
                      and e.get("scope") == "greet"]
    assert {e["block_id"] for e in nested_started} == {"pick", "out", "formal" if vip else "casual"}
