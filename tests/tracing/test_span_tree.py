"""The span tree of runs of different shapes (issue 28 made spans at the
moment they are needed rather than when their block starts: these pin down
that the spans are the same): each block's span starts and ends at its own
events' times, under its container's span; failures, skips and a cancelled
run still close every span with its status; a run started inside a caller's
span is its child."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import flowforge
from flowforge.service import tracing


@flowforge.function("trace_fail")
def trace_fail() -> dict:
    raise RuntimeError("trace_fail broke")


@flowforge.function("trace_sleep")
async def trace_sleep(seconds: float = 0.0) -> dict:
    await asyncio.sleep(seconds)
    return {}


@pytest.fixture
def provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.exporter = exporter
    tracing.use_tracer_provider(provider)
    yield provider
    tracing.use_tracer_provider(None)


def _spans(provider) -> dict[str, list]:
    by_name: dict[str, list] = {}
    for span in provider.exporter.get_finished_spans():
        by_name.setdefault(span.name, []).append(span)
    return by_name


def _parent_of(span, spans: dict[str, list]) -> str | None:
    if span.parent is None:
        return None
    return next(name for name, group in spans.items() for other in group
                if other.context.span_id == span.parent.span_id)


def _event_time(result, kind: str, block_id: str, scope: str | None = None) -> int:
    event = next(e for e in result.events if e["type"] == kind and e.get("block_id") == block_id
                 and (scope is None or e.get("scope") == scope))
    return int(event["time"] * 1e9)


SHAPES = {
    "loop passes under their loop": {"id": "looped", "blocks": [
        {"id": "first", "type": "set", "with": {"v": 1}},
        {"id": "each", "type": "loop", "with": {"times": 2}, "after": ["first"], "blocks": [
            {"id": "inner", "type": "set", "with": {"i": "{{loop.index}}"}}]}]},
    "parallel items under their map": {"id": "mapped", "blocks": [
        {"id": "each", "type": "parallel", "with": {"for_each": [1, 2, 3]}, "blocks": [
            {"id": "inner", "type": "set", "with": {"i": "{{loop.item}}"}}]}]},
}


@pytest.mark.parametrize("shape", SHAPES)
async def test_children_sit_under_their_container_at_their_own_times(provider, shape):
    result = await flowforge.run(SHAPES[shape], storage=False)
    assert result.status == "succeeded", result.error
    spans = _spans(provider)
    run_name = f"flowforge.run {SHAPES[shape]['id']}"
    inner = spans["flowforge.block inner"]
    assert len(inner) == (2 if "loop" in shape else 3)
    assert {_parent_of(span, spans) for span in inner} == {"flowforge.block each"}
    assert _parent_of(spans["flowforge.block each"][0], spans) == run_name
    assert _parent_of(spans[run_name][0], spans) is None
    for span in inner:
        scope = span.attributes["flowforge.scope"]
        assert span.start_time == _event_time(result, "block_started", "inner", scope)
        assert span.end_time == _event_time(result, "block_succeeded", "inner", scope)
        assert span.attributes["flowforge.status"] == "succeeded"
        assert span.attributes["flowforge.block_type"] == "set"
    each = spans["flowforge.block each"][0]
    assert each.start_time == _event_time(result, "block_started", "each")
    assert each.end_time == _event_time(result, "block_succeeded", "each")
    run = spans[run_name][0]
    assert run.start_time == int(result.events[0]["time"] * 1e9)
    assert run.attributes["flowforge.status"] == "succeeded"
    assert len({span.context.trace_id for group in spans.values() for span in group}) == 1


async def test_a_failure_and_the_skip_it_causes(provider):
    document = {"id": "breaks", "blocks": [
        {"id": "bad", "type": "function", "with": {"function": "trace_fail"}},
        {"id": "after", "type": "set", "with": {"v": "{{bad.x}}"}}]}
    result = await flowforge.run(document, storage=False)
    assert result.status == "failed"
    spans = _spans(provider)
    bad = spans["flowforge.block bad"][0]
    assert bad.attributes["flowforge.status"] == "failed"
    assert bad.attributes["error.type"] == "flowforge.block_failed"
    assert bad.status.status_code is StatusCode.ERROR
    assert "trace_fail broke" in bad.status.description
    after = spans["flowforge.block after"][0]
    assert after.attributes["flowforge.status"] == "skipped"
    assert after.attributes["flowforge.skip_reason"]
    assert after.start_time == after.end_time            # it never started
    run = spans["flowforge.run breaks"][0]
    assert run.attributes["flowforge.status"] == "failed"
    assert run.attributes["error.type"] == "flowforge.run_failed"
    assert {_parent_of(s, spans) for s in (bad, after)} == {"flowforge.run breaks"}


async def test_a_cancelled_run_closes_every_span(provider):
    document = {"id": "cut", "blocks": [
        {"id": "slow", "type": "function",
         "with": {"function": "trace_sleep", "args": {"seconds": 5}}},
        {"id": "next", "type": "set", "after": ["slow"], "with": {"v": 1}}]}
    handle = await flowforge.start_run(document, {}, storage=False)
    await asyncio.sleep(0.05)
    handle.cancel()
    result = await handle.wait()
    assert result.status == "cancelled"
    spans = _spans(provider)
    assert sorted(spans) == ["flowforge.block next", "flowforge.block slow",
                             "flowforge.run cut"]
    slow = spans["flowforge.block slow"][0]
    assert slow.attributes["flowforge.status"] == "cancelled"
    assert slow.start_time == _event_time(result, "block_started", "slow")
    assert slow.end_time <= spans["flowforge.run cut"][0].end_time
    assert spans["flowforge.run cut"][0].attributes["flowforge.status"] == "cancelled"


async def test_a_run_started_inside_a_callers_span_is_its_child(provider):
    with provider.get_tracer("caller").start_as_current_span("handle request") as outer:
        result = await flowforge.run({"id": "nested", "blocks": [
            {"id": "a", "type": "set", "with": {"v": 1}}]}, storage=False)
    assert result.status == "succeeded"
    run = _spans(provider)["flowforge.run nested"][0]
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id
    assert run.context.trace_id == outer.get_span_context().trace_id


async def test_runs_started_together_in_different_callers_spans_each_join_their_own(provider):
    """Spans are made after the loop's turn, all runs' together: each run's span
    still takes the context its run started in, not the one the turn ends in."""
    document = {"id": "joined", "blocks": [{"id": "a", "type": "function", "with": {
        "function": "trace_sleep", "args": {"seconds": 0.01}}}]}
    caller = provider.get_tracer("caller")

    async def handle(name: str) -> str:
        with caller.start_as_current_span(name) as outer:
            result = await flowforge.run(document, storage=False)
            assert result.status == "succeeded"
            return format(outer.get_span_context().span_id, "016x")

    outers = await asyncio.gather(*(handle(f"request {i}") for i in range(4)))
    runs = _spans(provider)["flowforge.run joined"]
    assert sorted(format(run.parent.span_id, "016x") for run in runs) == sorted(outers)
    assert all(run.context.trace_id == run.parent.trace_id for run in runs)


def test_events_queued_when_their_loop_ends_are_traced_at_the_next_loops_first_turn(provider):
    """A run's events wait for the end of the loop's turn; a loop that stops
    before that turn (a program's `asyncio.run` returning mid-run) leaves them
    queued, and the next loop of the thread traces them, in order, at its first
    turn, not only when one of its runs ends."""
    start = 1_700_000_000.0

    def event(run: str, kind: str, seq: int, at: float, **more) -> dict:
        return {"type": kind, "run_id": run, "seq": seq, "time": start + at, **more}

    first = tracing.tracer_for_run("r-first", "first", lambda data: data)

    async def first_loop() -> None:
        first.defer(event("r-first", "run_started", 1, 0.0))
        first.defer(event("r-first", "block_started", 2, 0.001, block_id="a", block_type="set"))
        first.defer(event("r-first", "block_succeeded", 3, 0.002, block_id="a"))
        asyncio.get_running_loop().stop()           # before the turn that would trace them

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(first_loop())
    finally:
        loop.close()
    assert provider.exporter.get_finished_spans() == ()     # still queued

    second = tracing.tracer_for_run("r-second", "second", lambda data: data)

    async def next_loop() -> None:
        second.defer(event("r-second", "run_started", 1, 0.010))
        await asyncio.sleep(0)                      # this loop's first turn ends
        assert [span.name for span in provider.exporter.get_finished_spans()] == \
            ["flowforge.block a"]
        first.defer(event("r-first", "run_finished", 4, 0.003, status="succeeded"))
        second.defer(event("r-second", "run_finished", 2, 0.011, status="succeeded"))

    asyncio.run(next_loop())
    spans = _spans(provider)
    block, run = spans["flowforge.block a"][0], spans["flowforge.run first"][0]
    assert _parent_of(block, spans) == "flowforge.run first"
    assert (block.start_time, block.end_time) == (int((start + 0.001) * 1e9),
                                                 int((start + 0.002) * 1e9))
    assert (run.start_time, run.end_time) == (int(start * 1e9), int((start + 0.003) * 1e9))
    assert spans["flowforge.run second"][0].attributes["flowforge.status"] == "succeeded"
