"""Run semantics as a table of named graph shapes, with the exact status of
every block asserted (Haystack's habit): each row is a workflow a user could
write and what they must get from it."""

from __future__ import annotations

import asyncio
import time

import pytest

import flowforge
from tests.engine.helpers import run_doc, statuses

CALLS: list[str] = []


@flowforge.function("shape_fail")
def shape_fail(message: str = "boom") -> dict:
    raise ValueError(message)


@flowforge.function("shape_sleep")
async def shape_sleep(ms: float, tag: str = "") -> dict:
    await asyncio.sleep(ms / 1000)
    CALLS.append(tag)
    return {"slept": ms, "tag": tag}


FLAKY: dict[str, int] = {}


@flowforge.function("shape_flaky")
def shape_flaky(key: str, failures: int) -> dict:
    FLAKY[key] = FLAKY.get(key, 0) + 1
    if FLAKY[key] <= failures:
        raise RuntimeError(f"attempt {FLAKY[key]} failed")
    return {"attempts": FLAKY[key]}


def s(id, after=None, **with_):
    block = {"id": id, "type": "set", "with": with_}
    if after:
        block["after"] = after
    return block


SHAPES = {
    "linear": (
        [s("a", v=1), s("b", v="{{a.v}}"), s("c", v="{{b.v}}")],
        {}, "succeeded", {"a": "succeeded", "b": "succeeded", "c": "succeeded"}),
    "diamond": (
        [s("top", v=2), s("left", v={"expr": "top.v + 1"}), s("right", v={"expr": "top.v * 10"}),
         s("join", total={"expr": "left.v + right.v"})],
        {}, "succeeded",
        {"top": "succeeded", "left": "succeeded", "right": "succeeded", "join": "succeeded"}),
    "branch-skip-join": (
        [s("score", v=9),
         {"id": "gate", "type": "condition",
          "with": {"cases": [{"when": "score.v >= 8", "goto": "good"}], "default": "bad"}},
         s("good", label="good"), s("bad", label="bad"),
         s("after_bad", x="{{bad.label}}"),
         s("join", after=["good", "bad"], label="{{good.label}}{{bad.label}}")],
        {}, "succeeded",
        {"score": "succeeded", "gate": "succeeded", "good": "succeeded", "bad": "skipped",
         "after_bad": "skipped", "join": "succeeded"}),
    "dead-branch-reading-an-always-run-block-is-skipped": (     # issue 25's minimal case
        [s("base", fee=2),
         {"id": "gate", "type": "condition",
          "with": {"cases": [{"when": "base.fee > 1", "goto": "big"}], "default": "small"}},
         s("big", v=1), s("small", v=1),
         s("charge_small", after=["small"], fee="{{base.fee}}"),
         s("receipt", total="{{charge_small.fee}}", fee="{{base.fee}}")],
        {}, "succeeded",
        {"base": "succeeded", "gate": "succeeded", "big": "succeeded", "small": "skipped",
         "charge_small": "skipped", "receipt": "skipped"}),
    "explicit-any-join-runs-on-one-branch-and-reads-none-for-the-other": (
        [s("base", fee=2),
         {"id": "gate", "type": "condition",
          "with": {"cases": [{"when": "base.fee > 1", "goto": "big"}], "default": "small"}},
         s("big", v="big"), s("small", v="small"),
         s("reply", after={"any": ["big", "small"]}, text="{{big.v}}/{{small.v}}",
           other="{{small.v}}", fee="{{base.fee}}")],
        {}, "succeeded",
        {"base": "succeeded", "gate": "succeeded", "big": "succeeded", "small": "skipped",
         "reply": "succeeded"}),
    "all-join-needs-every-member": (
        [s("base", fee=2),
         {"id": "gate", "type": "condition",
          "with": {"cases": [{"when": "base.fee > 1", "goto": "big"}], "default": "small"}},
         s("big", v=1), s("small", v=1), s("both", after={"all": ["big", "small"]})],
        {}, "succeeded",
        {"base": "succeeded", "gate": "succeeded", "big": "succeeded", "small": "skipped",
         "both": "skipped"}),
    "handler-joined-with-a-route-runs-on-either": (
        [{"id": "check", "type": "function", "with": {"function": "shape_fail"},
          "on_error": "fallback"},
         s("ok", v="{{check.v}}"),
         s("fallback", after={"any": ["check", "ok"]}, why="{{check.error}}")],
        {}, "succeeded", {"check": "failed", "ok": "skipped", "fallback": "succeeded"}),
    "condition-without-default-skips-all-targets": (
        [s("score", v=1),
         {"id": "gate", "type": "condition",
          "with": {"cases": [{"when": "score.v > 5", "goto": "high"}]}},
         s("high", v=1), s("independent", v=2)],
        {}, "succeeded",
        {"score": "succeeded", "gate": "succeeded", "high": "skipped", "independent": "succeeded"}),
    "failure-skip": (
        [s("a", v=1),
         {"id": "boom", "type": "function", "with": {"function": "shape_fail"}, "after": ["a"]},
         s("child", after=["boom"], v=1), s("grandchild", v="{{child.v}}"),
         s("join", after=["a", "boom"], v=1), s("independent", after=["a"], v=3)],
        {}, "failed",
        {"a": "succeeded", "boom": "failed", "child": "skipped", "grandchild": "skipped",
         "join": "skipped", "independent": "succeeded"}),
    "on_error": (
        [{"id": "boom", "type": "function", "with": {"function": "shape_fail",
                                                     "args": {"message": "disk full"}},
          "on_error": "recover"},
         s("normal", v="{{boom.x}}"),
         s("recover", why="{{boom.error}}"),
         s("after_recover", ok=True, after=["recover"])],
        {}, "succeeded",
        {"boom": "failed", "normal": "skipped", "recover": "succeeded",
         "after_recover": "succeeded"}),
    "on_error-handler-skipped-on-success": (
        [{"id": "fine", "type": "set", "with": {"v": 1}, "on_error": "recover"},
         s("recover", v=0), s("next", v="{{fine.v}}")],
        {}, "succeeded", {"fine": "succeeded", "recover": "skipped", "next": "succeeded"}),
    "loop-until": (
        [{"id": "refine", "type": "loop", "with": {"until": "judge.score >= 0.8",
                                                   "max_iterations": 10},
          "blocks": [s("judge", score={"expr": "(loop.index + 1) * 0.3"})]},
         s("after", passes="{{refine.count}}")],
        {}, "succeeded", {"refine": "succeeded", "after": "succeeded"}),
    "loop-hits-max-iterations": (
        [{"id": "refine", "type": "loop", "with": {"until": "judge.score >= 100",
                                                   "max_iterations": 4},
          "blocks": [s("judge", score={"expr": "loop.index"})]}],
        {}, "succeeded", {"refine": "succeeded"}),
    "loop-for-each-runs-every-item-past-ten": (
        [{"id": "each", "type": "loop", "with": {"for_each": list(range(12))},
          "blocks": [s("seen", v="{{loop.item}}")]},
         s("after", n="{{each.count}}")],
        {}, "succeeded", {"each": "succeeded", "after": "succeeded"}),
    "loop-max-iterations-below-the-list-fails-before-the-work": (
        [{"id": "each", "type": "loop", "with": {"for_each": "{{input.items}}",
                                                 "max_iterations": 10},
          "blocks": [s("seen", v="{{loop.item}}")]},
         s("after", n="{{each.count}}")],
        {"items": list(range(12))}, "failed", {"each": "failed", "after": "skipped"}),
    "loop-until-reaching-its-cap-with-items-left-fails": (
        [{"id": "each", "type": "loop", "with": {"for_each": "{{input.items}}",
                                                 "until": "seen.v > 100", "max_iterations": 3},
          "blocks": [s("seen", v="{{loop.item}}")]}],
        {"items": list(range(12))}, "failed", {"each": "failed"}),
    "loop-until-holding-before-the-cap-succeeds": (
        [{"id": "each", "type": "loop", "with": {"for_each": "{{input.items}}",
                                                 "until": "seen.v >= 1", "max_iterations": 3},
          "blocks": [s("seen", v="{{loop.item}}")]}],
        {"items": list(range(12))}, "succeeded", {"each": "succeeded"}),
    "loop-child-failure-fails-loop": (
        [{"id": "refine", "type": "loop", "with": {"times": 3},
          "blocks": [{"id": "bad", "type": "function", "with": {"function": "shape_fail"}}]},
         s("after", v="{{refine.count}}")],
        {}, "failed", {"refine": "failed", "after": "skipped"}),
    "parallel-map": (
        [{"id": "each", "type": "parallel",
          "with": {"for_each": [3, 1, 2], "max_concurrency": 2},
          "blocks": [s("twice", v={"expr": "loop.item * 2"})]},
         s("sum", total={"expr": "sum([r.twice.v for r in each.results])"} if False else
           {"expr": "each.count"})],
        {}, "succeeded", {"each": "succeeded", "sum": "succeeded"}),
    "nested": (
        [{"id": "inner", "type": "workflow",
          "with": {"workflow": "shape-inner", "inputs": {"n": 4}}},
         s("outer", v="{{inner.answer.message}}")],
        {}, "succeeded", {"inner": "succeeded", "outer": "succeeded"}),
    "timeout": (
        [{"id": "slow", "type": "function", "timeout": 0.05,
          "with": {"function": "shape_sleep", "args": {"ms": 2000}}},
         s("after", v="{{slow.slept}}")],
        {}, "failed", {"slow": "failed", "after": "skipped"}),
    "retry-succeeds": (
        [{"id": "flaky", "type": "function", "retry": {"attempts": 3, "backoff": 0.001},
          "with": {"function": "shape_flaky", "args": {"key": "r1", "failures": 2}}},
         s("after", n="{{flaky.attempts}}")],
        {}, "succeeded", {"flaky": "succeeded", "after": "succeeded"}),
    "retry-exhausted": (
        [{"id": "flaky", "type": "function", "retry": {"attempts": 2, "backoff": 0.001},
          "with": {"function": "shape_flaky", "args": {"key": "r2", "failures": 5}}}],
        {}, "failed", {"flaky": "failed"}),
}

flowforge.register_workflow({
    "id": "shape-inner", "inputs": {"n": {"type": "integer"}},
    "blocks": [{"id": "answer", "type": "response",
                "with": {"message": {"expr": "input.n * input.n"}}}]})


@pytest.mark.parametrize("name", list(SHAPES))
async def test_shape(name):
    blocks, inputs, run_status, expected = SHAPES[name]
    result = await run_doc(blocks, inputs)
    assert statuses(result) == expected
    assert result.status == run_status


async def test_a_skip_says_why_and_a_join_reads_none_for_the_member_that_did_not_run():
    result = await run_doc(SHAPES["dead-branch-reading-an-always-run-block-is-skipped"][0])
    reasons = {e["block_id"]: e["reason"] for e in result.events if e["type"] == "block_skipped"}
    assert reasons == {"small": "not on the chosen route",
                       "charge_small": "not on the chosen route",
                       "receipt": "not on the chosen route"}
    result = await run_doc(SHAPES["explicit-any-join-runs-on-one-branch-and-reads-none-for-"
                                  "the-other"][0])
    assert result.results["reply"] == {"text": "big/", "other": None, "fee": 2}
    failed = await run_doc(SHAPES["failure-skip"][0])
    reasons = {e["block_id"]: e["reason"] for e in failed.events if e["type"] == "block_skipped"}
    assert reasons == {"child": "dependency 'boom' failed", "grandchild": "dependency 'boom' failed",
                       "join": "dependency 'boom' failed"}


async def test_shape_outputs_are_what_the_blocks_computed():
    result = await run_doc(SHAPES["diamond"][0])
    assert result.results["join"] == {"total": 23}
    loop = (await run_doc(SHAPES["loop-until"][0])).results
    assert loop["refine"]["count"] == 3 and loop["after"] == {"passes": 3}
    assert [p["judge"]["score"] for p in loop["refine"]["iterations"]] == pytest.approx([0.3, 0.6, 0.9])
    capped = (await run_doc(SHAPES["loop-hits-max-iterations"][0])).results["refine"]
    assert capped["count"] == 4 and capped["judge"]["score"] == 3
    parallel = (await run_doc(SHAPES["parallel-map"][0])).results["each"]
    assert [r["twice"]["v"] for r in parallel["results"]] == [6, 2, 4]
    nested = (await run_doc(SHAPES["nested"][0])).results["outer"]
    assert nested == {"v": 16}
    handled = (await run_doc(SHAPES["on_error"][0])).results
    assert handled["recover"] == {"why": "ValueError: disk full"}


async def test_a_loop_never_drops_items_and_a_cap_that_would_cut_names_itself():
    every = (await run_doc(SHAPES["loop-for-each-runs-every-item-past-ten"][0])).results
    assert every["each"]["count"] == 12 and every["after"] == {"n": 12}
    assert [p["seen"]["v"] for p in every["each"]["iterations"]] == list(range(12))
    blocks, inputs, _, _ = SHAPES["loop-max-iterations-below-the-list-fails-before-the-work"]
    cut = await run_doc(blocks, inputs)
    error = cut.blocks["each"].error
    assert "loop 'each'" in error and "12 items" in error and "`max_iterations` is 10" in error
    assert not any(e["type"] == "block_started" and e["block_id"] == "seen" for e in cut.events)
    blocks, inputs, _, _ = SHAPES["loop-until-reaching-its-cap-with-items-left-fails"]
    late = await run_doc(blocks, inputs)
    assert "`until` was still false after 3 passes" in late.blocks["each"].error
    blocks, inputs, _, _ = SHAPES["loop-until-holding-before-the-cap-succeeds"]
    assert (await run_doc(blocks, inputs)).results["each"]["count"] == 2


def test_validate_refuses_a_written_list_longer_than_max_iterations():
    with pytest.raises(flowforge.ValidationFailed) as info:
        flowforge.load({"id": "cap", "blocks": [
            {"id": "each", "type": "loop", "with": {"for_each": [1, 2, 3], "max_iterations": 2},
             "blocks": [s("seen", v="{{loop.item}}")]}]})
    assert [str(p) for p in info.value.problems] == [
        "blocks[0].with.max_iterations: `for_each` asks for 3 items but `max_iterations` is 2: "
        "the loop would stop early; raise it or remove it"]


async def test_timeout_and_retry_messages_name_the_problem():
    result = await run_doc(SHAPES["timeout"][0])
    assert result.blocks["slow"].error == "timed out after 0.05s"
    assert result.blocks["after"].status == "skipped"
    result = await run_doc(SHAPES["retry-exhausted"][0])
    assert "attempt" in result.blocks["flaky"].error
    assert sum(1 for e in result.events if e["type"] == "block_retrying") == 1


async def test_cancel_keeps_finished_blocks_and_cancels_the_rest():
    doc = {"id": "cancel", "blocks": [
        s("first", v=1),
        {"id": "long", "type": "function", "after": ["first"],
         "with": {"function": "shape_sleep", "args": {"ms": 5000}}},
        s("after_long", v="{{long.slept}}"),
    ]}
    handle = await flowforge.start_run(doc, {})
    await asyncio.sleep(0.05)
    handle.cancel()
    result = await handle.wait()
    assert result.status == "cancelled"
    assert statuses(result) == {"first": "succeeded", "long": "cancelled",
                                "after_long": "cancelled"}
    assert result.results["first"] == {"v": 1}


async def test_ready_queue_starts_a_block_as_soon_as_its_own_dependencies_settle():
    # fast -> after_fast must not wait for `slow`, which sits at the same "level".
    CALLS.clear()
    doc = [
        {"id": "slow", "type": "function", "with": {"function": "shape_sleep",
                                                    "args": {"ms": 300, "tag": "slow"}}},
        {"id": "fast", "type": "function", "with": {"function": "shape_sleep",
                                                    "args": {"ms": 10, "tag": "fast"}}},
        {"id": "after_fast", "type": "function", "after": ["fast"],
         "with": {"function": "shape_sleep", "args": {"ms": 10, "tag": "after_fast"}}},
    ]
    started = time.perf_counter()
    result = await run_doc(doc)
    assert CALLS == ["fast", "after_fast", "slow"]
    assert result.blocks["after_fast"].finished_at < result.blocks["slow"].finished_at
    assert time.perf_counter() - started < 0.6


async def test_concurrency_limit_is_respected():
    running = {"now": 0, "peak": 0}

    @flowforge.function("shape_count")
    async def count():
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.01)
        running["now"] -= 1
        return {}

    blocks = [{"id": f"b{i}", "type": "function", "with": {"function": "shape_count"}}
              for i in range(12)]
    result = await run_doc(blocks, concurrency=3)
    assert result.status == "succeeded"
    assert running["peak"] == 3


async def test_a_long_chain_of_inline_blocks_does_not_exhaust_the_stack():
    blocks = [s("b0", v=0)] + [s(f"b{i}", v={"expr": f"b{i - 1}.v + 1"}) for i in range(1, 3000)]
    result = await run_doc(blocks)
    assert result.status == "succeeded"
    assert result.results["b2999"] == {"v": 2999}


async def test_events_tell_the_whole_story_in_order():
    result = await run_doc(SHAPES["branch-skip-join"][0])
    kinds = [e["type"] for e in result.events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert [e["seq"] for e in result.events] == list(range(1, len(kinds) + 1))
    skipped = [e for e in result.events if e["type"] == "block_skipped"]
    assert {e["block_id"]: e["reason"] for e in skipped} == {
        "bad": "not on the chosen route", "after_bad": "not on the chosen route"}
    started = [e["block_id"] for e in result.events if e["type"] == "block_started"]
    assert "bad" not in started


async def test_memory_is_loaded_before_and_saved_after_a_run():
    doc = {"id": "mem", "memory": ["last_topic"], "inputs": {"topic": {"type": "string"}},
           "blocks": [s("remember", last_topic="{{input.topic}}", before="{{memory.last_topic}}")]}
    first = await flowforge.run(doc, {"topic": "refunds"}, user="alice")
    assert first.memory == {"last_topic": "refunds"}
    second = await flowforge.run(doc, {"topic": "shipping"}, user="alice")
    assert second.results["remember"]["before"] == "refunds"
    other = await flowforge.run(doc, {"topic": "x"}, user="bob")
    assert other.results["remember"]["before"] is None


async def test_run_result_json_has_exactly_the_documented_fields():
    result = await run_doc(SHAPES["linear"][0])
    data = result.to_dict()
    assert list(data) == ["run_id", "workflow_id", "status", "outputs", "results", "blocks",
                          "usage", "memory", "events"]
    assert set(data["blocks"]["a"]) == {"status", "started_at", "finished_at", "duration_ms",
                                        "error"}
    assert data["outputs"] == {"c": {"v": 1}}          # no response block: the sinks
    assert data["usage"]["tokens"] == {"prompt": 0, "completion": 0, "total": 0}


async def test_cancelling_the_caller_cancels_the_run_and_returns_its_record():
    doc = {"id": "outer-cancel", "blocks": [
        s("first", v=1),
        {"id": "long", "type": "function", "after": ["first"],
         "with": {"function": "shape_sleep", "args": {"ms": 5000}}}]}
    task = asyncio.ensure_future(flowforge.run(doc, {}, storage=False))
    await asyncio.sleep(0.05)
    task.cancel()
    result = await task
    assert result.status == "cancelled"
    assert statuses(result) == {"first": "succeeded", "long": "cancelled"}


async def test_cancel_right_after_a_block_got_its_task_does_not_hang():
    # `first` finishes at once; `long` runs in the run's own Task and `other`
    # gets a Task of its own.  Cancelling before that Task has run a single
    # step must still settle `other` and end the run.
    doc = {"id": "cancel-early", "blocks": [
        s("first", v=1),
        {"id": "long", "type": "function", "after": ["first"],
         "with": {"function": "shape_sleep", "args": {"ms": 5000}}},
        {"id": "other", "type": "function", "after": ["first"],
         "with": {"function": "shape_sleep", "args": {"ms": 5000}}},
        s("after_long", v="{{long.slept}}")]}
    handle = await flowforge.start_run(doc, {})
    await asyncio.sleep(0)          # the run's task takes one step: first done, long queued
    handle.cancel()
    result = await asyncio.wait_for(handle.wait(), 5)
    assert result.status == "cancelled"
    assert statuses(result) == {"first": "succeeded", "long": "cancelled",
                                "other": "cancelled", "after_long": "cancelled"}
    blocks = {e["block_id"]: e["reason"] for e in result.events
              if e["type"] == "block_cancelled"}
    assert blocks == {"long": "cancelled while running", "other": "cancelled before it started",
                      "after_long": "the run was cancelled"}


async def test_cancelling_a_run_leaves_no_cancellation_pending_on_the_task_running_it():
    # The run's blocks run in the Task that awaits the run; `cancel()` cancels
    # that Task's block, and must take its cancellation request back, or an
    # `asyncio.timeout` / TaskGroup around the run would misread it.
    doc = {"id": "cancel-own", "blocks": [
        {"id": "long", "type": "function",
         "with": {"function": "shape_sleep", "args": {"ms": 5000}}}]}
    handle = await flowforge.start_run(doc, {})
    await asyncio.sleep(0.02)
    handle.cancel()
    result = await asyncio.wait_for(handle.wait(), 5)
    assert result.status == "cancelled"
    assert handle.task.cancelling() == 0


@flowforge.function("shape_inner_cancel")
async def shape_inner_cancel() -> dict:
    future = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(future.cancel)
    await future                     # raises CancelledError: nobody cancelled the run
    return {}


async def test_a_cancelled_error_from_inside_a_block_fails_that_block_only():
    doc = {"id": "inner-cancel", "blocks": [
        {"id": "odd", "type": "function", "with": {"function": "shape_inner_cancel"},
         "on_error": "recover"},
        s("recover", why="{{odd.error}}"),
        s("unrelated", v=2)]}
    result = await asyncio.wait_for(flowforge.run(doc, {}, storage=False), 5)
    assert result.status == "succeeded"
    assert statuses(result) == {"odd": "failed", "recover": "succeeded",
                                "unrelated": "succeeded"}
    assert "cancelled from inside" in result.results["recover"]["why"]
