"""Every value a run makes is bounded: a bound reached fails the block, located,
before the memory is spent (one tenant's doubling template once grew a server
to 19 GB in a minute and the kernel killed it)."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.engine.limits import ValueLimits, forget_process_limits, size_of

from tests.engine.helpers import run_doc, statuses


@flowforge.function("vl_big")
def big(chars: int) -> dict:
    return {"text": "x" * chars}


@pytest.fixture(autouse=True)
def _limits_read_again():
    """Each test sets the environment's limits; a run reads them once per process."""
    forget_process_limits()
    yield
    forget_process_limits()


def _doubling(count: int) -> list[dict]:
    blocks = [{"id": "a0", "type": "set", "with": {"v": "y" * 1000}}]
    for k in range(1, count):
        blocks.append({"id": f"a{k}", "type": "set",
                       "with": {"v": f"{{{{a{k - 1}.v}}}}{{{{a{k - 1}.v}}}}"}})
    return blocks


async def test_a_doubling_template_fails_its_block_located_before_the_text_is_made(monkeypatch):
    monkeypatch.setenv("FLOWFORGE_MAX_VALUE_MB", "0.1")          # 100,000 characters
    result = await run_doc(_doubling(31))
    assert result.status == "failed"
    got = statuses(result)
    # 1,000 * 2**6 = 64,000 renders; 2**7 = 128,000 would pass the limit.
    assert all(got[f"a{k}"] == "succeeded" for k in range(7))
    assert got["a7"] == "failed" and all(got[f"a{k}"] == "skipped" for k in range(8, 31))
    error = result.blocks["a7"].error
    assert error.startswith("with.v: the text rendered from its templates would be 128,000 "
                            "characters, more than the limit of 100,000 characters")
    assert "FLOWFORGE_MAX_VALUE_MB" in error
    assert len(result.results["a6"]["v"]) == 64_000


async def test_the_default_limit_stops_the_doubling_long_before_the_memory_is_spent():
    result = await run_doc(_doubling(31))
    assert result.status == "failed"
    failed = [bid for bid, status in statuses(result).items() if status == "failed"]
    assert failed == ["a14"]                  # 1 KB * 2**14 = 16.4 MB, over 16 MB
    assert "16.4 MB, more than the limit of 16.0 MB" in result.blocks["a14"].error


async def test_a_block_output_over_its_limit_fails_the_block(monkeypatch):
    monkeypatch.setenv("FLOWFORGE_MAX_OUTPUT_MB", "0.05")
    result = await run_doc([
        {"id": "small", "type": "function", "with": {"function": "vl_big",
                                                     "args": {"chars": 10_000}}},
        {"id": "huge", "type": "function", "with": {"function": "vl_big",
                                                    "args": {"chars": 60_000}}},
        {"id": "after", "type": "set", "with": {"n": "{{huge.text}}"}}])
    assert statuses(result) == {"small": "succeeded", "huge": "failed", "after": "skipped"}
    assert "the block's output would be" in result.blocks["huge"].error
    assert "FLOWFORGE_MAX_OUTPUT_MB" in result.blocks["huge"].error
    assert "huge" not in result.results or result.results["huge"].get("text") is None


async def test_the_run_total_is_bounded_across_blocks(monkeypatch):
    monkeypatch.setenv("FLOWFORGE_MAX_RUN_MB", "0.1")
    blocks = [{"id": f"b{k}", "type": "function", "after": [f"b{k - 1}"] if k else [],
               "with": {"function": "vl_big", "args": {"chars": 30_000}}} for k in range(5)]
    result = await run_doc(blocks)
    got = statuses(result)
    assert [got[f"b{k}"] for k in range(5)] == ["succeeded"] * 3 + ["failed", "skipped"]
    assert "what the run's blocks output together" in result.blocks["b3"].error


async def test_a_server_sets_the_limits_per_run_through_its_services():
    doc = flowforge.load({"id": "t", "blocks": _doubling(10)})
    result = await flowforge.run(doc, {}, storage=False, services={"max_value_mb": 0.01})
    assert statuses(result)["a4"] == "failed"         # 16,000 > 10,000


def test_size_of_counts_nested_text_and_stops_past_the_limit():
    assert size_of("abc", 10) == 3
    assert size_of({"a": ["xy", 1]}, 100) == 2 + 5 + 2 + 2 + 4 + 8
    huge = ["x" * 10] * 1_000_000
    assert size_of(huge, 100) == 1_000_002          # its length alone passes: not walked
    limits = ValueLimits.of({"max_value_mb": 2, "max_output_mb": 3, "max_run_mb": 4})
    assert (limits.value, limits.output, limits.run) == (2_000_000, 3_000_000, 4_000_000)


def test_a_recorded_run_takes_the_process_limits_read_once(monkeypatch):
    """A recorded run's services hold its storage, not limits: it takes the
    process's limits, read from the environment once, not at every run."""
    monkeypatch.setenv("FLOWFORGE_MAX_VALUE_MB", "2")
    process = ValueLimits.of()
    assert process.value == 2_000_000
    monkeypatch.setenv("FLOWFORGE_MAX_VALUE_MB", "3")
    assert ValueLimits.of({"storage": object()}) is process
    assert ValueLimits.of({"storage": object(), "max_value_mb": 1}).value == 1_000_000
