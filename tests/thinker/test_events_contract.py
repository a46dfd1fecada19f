"""The build's events keep the intent-to-pipeline contract that its clients
parse: the names, the fields each carries, and a `ts` in ISO 8601 UTC."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from flowforge.providers.scripted import register_script, unregister_script
from flowforge.apps.thinker import BUILD_EVENT_TYPES, build
from tests.thinker.conftest import rules


def _when(ts: str) -> datetime:
    assert ts.endswith("Z"), ts
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


async def test_every_event_is_named_and_shaped_as_the_contract_says(registry):
    started = datetime.now(timezone.utc)
    result = await build("Convert Fahrenheit temperatures to Celsius and give their average",
                         model=rules("temperature-average"), registry=registry)
    assert result.ok, result.error
    events = result.events
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "complete"
    assert set(kinds) <= set(BUILD_EVENT_TYPES)
    # llm_progress only when an answer takes over half a second (test below)
    assert set(BUILD_EVENT_TYPES) - set(kinds) == {"block_create_failed", "llm_progress"}
    times = [_when(e["time"]) for e in events]
    assert times == sorted(times) and started.replace(microsecond=0) <= times[0]
    assert times[0].tzinfo is not None and times[0].utcoffset().total_seconds() == 0
    # `ts` is epoch seconds, as the seed's clients read it; `time` the same instant
    assert all(isinstance(e["ts"], float) for e in events)
    assert all(abs(e["ts"] - _when(e["time"]).timestamp()) < 0.002 for e in events)
    # each plan the model answers is validated at the decompose stage itself
    stages = [e["stage"] for e in events if e["type"] == "validation"]
    assert stages[0] == "decompose" and "wire" in stages
    first_wire = next(i for i, e in enumerate(events) if e.get("stage") == "wire")
    first_check = next(i for i, e in enumerate(events) if e["type"] == "validation")
    assert first_check < first_wire

    def of(kind):
        return [e for e in events if e["type"] == kind]

    assert of("start")[0]["intent"].startswith("Convert Fahrenheit")
    prompt, response = of("llm_prompt")[0], of("llm_response")[0]
    assert [m["role"] for m in prompt["prompts"]] == ["system", "user"]
    assert "planner" in prompt["prompts"][0]["content"]
    assert json.loads(response["response"])["blocks"][0]["suggested_id"] == \
        "fahrenheit_to_celsius"
    assert isinstance(response["elapsed"], float) and response["elapsed"] >= 0
    planned = of("decompose_blocks")[0]["blocks"]
    assert [(b["suggested_id"], b["depends_on"]) for b in planned] == \
        [("fahrenheit_to_celsius", []), ("average", ["fahrenheit_to_celsius"])]
    assert [e["suggested_id"] for e in of("search_missing")] == ["fahrenheit_to_celsius"]
    assert [(e["suggested_id"], e["block_id"]) for e in of("search_found")] == \
        [("average", "math_stats")]
    assert [e["suggested_id"] for e in of("creating_block")] == ["fahrenheit_to_celsius"] * 2
    assert of("block_test_failed")[0]["block_id"] == "fahrenheit_to_celsius"
    assert of("block_test_passed")[0]["block_id"] == "fahrenheit_to_celsius"
    created = of("block_created")[0]["block"]
    assert created["id"] == "fahrenheit_to_celsius" and "* 5 / 9" in created["source_code"]
    assert [(e["stage"], e["valid"]) for e in of("validation")] == [("decompose", True),
                                                                    ("wire", True)]
    assert [e["stage"] for e in of("stage_result")] == ["decompose", "search", "create", "wire"]
    assert of("stage_result")[1]["missing"] == ["fahrenheit_to_celsius"]

    complete = events[-1]
    assert complete["result"]["pipeline_json"] == result.pipeline
    assert complete["result"]["status"] == "done"
    assert [entry["step"] for entry in complete["result"]["log"]] == \
        ["decompose", "search", "create", "wire"]
    assert complete["result"]["log"][2] == {"step": "create",
                                            "created": ["fahrenheit_to_celsius"], "failed": []}
    json.dumps(events)                      # every event goes out as SSE data as it is


async def test_a_failed_build_completes_with_status_error_and_the_failure_logged(registry):
    def model(messages, tools):
        if "planner" in messages[0].content:
            return json.dumps({"blocks": [{"suggested_id": "broken", "depends_on": [],
                                           "description": "Doubles x",
                                           "execution_type": "python",
                                           "input_schema": {"type": "object", "properties": {
                                               "x": {"type": "number"}}},
                                           "output_schema": {"type": "object", "properties": {
                                               "y": {"type": "number"}}}}]})
        return json.dumps({"source_code": "async def execute(inputs, context):\n"
                                          "    return {'y': inputs['x']}\n",
                           "examples": [{"inputs": {"x": 1}, "outputs": {"y": 2}}]})

    register_script("contract-broken", model)
    try:
        result = await build("Double x", model="scripted/contract-broken", registry=registry)
    finally:
        unregister_script("contract-broken")
    assert not result.ok
    creating = [e for e in result.events if e["type"] == "creating_block"]
    assert [e["attempt"] for e in creating] == [1, 2, 3, 4]     # a first try and 3 retries
    failed = [e for e in result.events if e["type"] == "block_create_failed"]
    assert len(failed) == 1 and failed[0]["block_id"] == "broken"
    assert "expected {'y': 2}" in failed[0]["error"]
    complete = result.events[-1]
    assert complete["result"]["status"] == "error"
    assert complete["result"]["pipeline_json"] is None
    assert complete["result"]["log"][-1]["step"] == "create"
    assert "could not write a block" in complete["result"]["log"][-1]["error"]


async def test_depends_on_must_name_blocks_of_the_plan_and_name_is_taken_for_suggested_id(
        registry):
    answers = iter([
        {"blocks": [{"name": "text_word_count", "depends_on": ["fetch_text"],
                     "description": "Counts the words", "execution_type": "python",
                     "input_schema": {"type": "object", "properties": {"text": {
                         "type": "string"}}, "required": ["text"]},
                     "output_schema": {"type": "object", "properties": {"words": {
                         "type": "integer"}}}}]},
        {"blocks": [{"name": "text_word_count", "depends_on": [],
                     "description": "Counts the words", "execution_type": "python",
                     "input_schema": {"type": "object", "properties": {"text": {
                         "type": "string"}}, "required": ["text"]},
                     "output_schema": {"type": "object", "properties": {"words": {
                         "type": "integer"}}}}]},
        {"id": "count", "name": "Count", "nodes": [
            {"id": "n1", "block_id": "text_word_count", "inputs": {"text": "{{input.text}}"}}],
         "edges": []}])
    seen = []

    def model(messages, tools):
        seen.append(messages[-1].content)
        return json.dumps(next(answers))

    register_script("contract-depends", model)
    try:
        result = await build("Count words", model="scripted/contract-depends",
                             registry=registry)
    finally:
        unregister_script("contract-depends")
    assert result.ok, result.error
    assert "blocks[0].depends_on: 'fetch_text' is not another block of the plan" in seen[1]
    planned = [e for e in result.events if e["type"] == "decompose_blocks"][0]["blocks"]
    assert planned[0]["suggested_id"] == "text_word_count" and planned[0]["depends_on"] == []


async def test_a_slow_answer_reports_the_tokens_written_so_far():
    from flowforge.providers.scripted import register_script, unregister_script
    from flowforge.apps.thinker.events import BuildEvents
    from flowforge.apps.thinker.llm import ThinkerLLM

    register_script("slow_planner", {"rules": [{"reply": {"ok": True, "note": "a b c d e"},
                                                "latency_ms": 700}]})
    try:
        events = BuildEvents()
        llm = ThinkerLLM("scripted/slow_planner", events)
        value = await llm.ask("decompose", "plan", "go", {"type": "object"})
    finally:
        unregister_script("slow_planner")
    assert value == {"ok": True, "note": "a b c d e"}
    kinds = [e["type"] for e in events.events]
    assert kinds.index("llm_prompt") < kinds.index("llm_progress") < kinds.index("llm_response")
    progress = events.of_type("llm_progress")[0]
    assert progress["stage"] == "decompose" and progress["tokens"] >= 1 and progress["ts"]
