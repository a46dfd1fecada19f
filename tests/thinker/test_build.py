"""The whole path, sentence -> pipeline -> run, for three intents, driven by
the scripted rules files in examples/build/ (the same the transcripts use)."""

from __future__ import annotations

from flowforge.service.pipeline import run_pipeline
from flowforge.apps.thinker import build
from tests.thinker.conftest import rules


def types(result):
    return [e["type"] for e in result.events]


def stages(result):
    return [e["stage"] for e in result.events if e["type"] == "stage"]


async def test_an_intent_fully_served_by_the_registry(registry, tmp_path):
    before = set(await registry.ids())
    result = await build("Count the words of a text and summarise it",
                         model=rules("word-summary"), registry=registry)
    assert result.ok, result.error
    assert stages(result) == ["decompose", "search", "wire", "done"]
    assert result.matched == ["text_word_count", "llm_summarise"]
    assert result.created == [] and set(await registry.ids()) == before
    found = [(e["required"], e["block_id"]) for e in result.events if e["type"] == "search_found"]
    assert found == [("text_word_count", "text_word_count"), ("summarise_text", "llm_summarise")]
    assert "search_missing" not in types(result) and "creating_block" not in types(result)
    assert types(result)[-1] == "complete" and result.events[-1]["ok"] is True
    prompts = [e for e in result.events if e["type"] == "llm_prompt"]
    assert [p["stage"] for p in prompts] == ["decompose", "wire"]
    assert prompts[0]["response_format"]["required"] == ["blocks"]   # JSON-Schema constrained
    assert result.pipeline == {
        "id": "word-summary", "name": "Word count and summary",
        "user_prompt": "Count the words of a text and summarise it",
        "nodes": [{"id": "n1", "block_id": "text_word_count", "inputs": {"text": "{{input.text}}"}},
                  {"id": "n2", "block_id": "llm_summarise",
                   "inputs": {"text": "{{input.text}}", "max_sentences": 1}}],
        "edges": [], "memory_keys": [],
        "inputs": {"text": {"type": "string", "description": "The text to analyse"}}}

    run = await run_pipeline(result.pipeline, {"text": "Cats purr. Cats sleep. Dogs bark."},
                             model=rules("word-summary"), registry=registry,
                             storage=f"sqlite:///{tmp_path / 'runs.db'}")
    assert run.status == "succeeded", run.error
    assert run.results["n1"]["words"] == 6
    assert run.results["n2"]["summary"] == "Cats purr and sleep while dogs bark."


async def test_an_intent_needing_a_new_python_block_that_passes_on_the_second_attempt(registry):
    result = await build("Convert Fahrenheit temperatures to Celsius and give their average",
                         model=rules("temperature-average"), registry=registry)
    assert result.ok, result.error
    assert stages(result) == ["decompose", "search", "create", "wire", "done"]
    assert result.matched == ["math_stats"] and result.created == ["fahrenheit_to_celsius"]
    missing = [e for e in result.events if e["type"] == "search_missing"]
    assert [e["required"] for e in missing] == ["fahrenheit_to_celsius"]
    create = [(e["type"], e.get("attempt")) for e in result.events if e["type"] in (
        "creating_block", "block_test_failed", "block_test_passed", "block_created")]
    assert create == [("creating_block", 1), ("block_test_failed", 1), ("creating_block", 2),
                      ("block_test_passed", 2), ("block_created", None)]
    failed = next(e for e in result.events if e["type"] == "block_test_failed")
    assert "expected {'temps_c': [0.0, 100.0]}, got {'temps_c': [0.0, 112.5]}" in failed["error"]
    # The second attempt was told the first one's error.
    second = [e for e in result.events if e["type"] == "llm_prompt" and e["stage"] == "create"][1]
    assert "Your previous attempt failed: example 0: expected" in \
        second["messages"][-1]["content"]

    saved = await registry.get("fahrenheit_to_celsius")
    assert saved.metadata.created_by == "thinker" and saved.version == 1
    assert "* 5 / 9" in saved.source_code
    assert await registry.list(created_by="thinker") == [saved]

    assert result.pipeline["nodes"][1] == {"id": "n2", "block_id": "math_stats",
                                           "inputs": {"numbers": "{{n1.temps_c}}"}}
    run = await run_pipeline(result.pipeline, {"temps_f": [32, 50, 212]}, registry=registry,
                             storage=False)
    assert run.status == "succeeded", run.error
    assert run.results["n1"]["temps_c"] == [0.0, 10.0, 100.0]
    assert run.results["n2"]["mean"] == 110 / 3


async def test_an_intent_needing_a_new_llm_block_with_wiring_fed_back_once(registry, tmp_path):
    model = rules("review-reply")
    result = await build("Write a polite reply to a customer review", model=model,
                         registry=registry)
    assert result.ok, result.error
    assert result.created == ["review_reply"] and result.matched == []
    saved = await registry.get("review_reply")
    assert saved.execution_type == "llm" and saved.metadata.created_by == "thinker"
    assert "{review}" in saved.prompt_template
    # The block test filled the template and sent it to the model with the schema.
    test_prompt = [e for e in result.events if e["type"] == "block_test_passed"][0]
    assert test_prompt["results"][0]["output"] == {"reply": "Thank you for your kind words!",
                                                   "sentiment": "positive"}
    checks = [e for e in result.events if e["type"] == "validation" and e["stage"] == "wire"]
    assert [c["ok"] for c in checks] == [False, True]
    assert any("'n1' (review_reply) has no output 'answer'; its outputs: reply, sentiment" in p
               for p in checks[0]["problems"])
    assert result.pipeline["nodes"] == [{"id": "n1", "block_id": "review_reply",
                                         "inputs": {"review": "{{input.review}}"}}]
    assert result.pipeline["memory_keys"] == ["reply"]

    storage = f"sqlite:///{tmp_path / 'runs.db'}"
    run = await run_pipeline(result.pipeline, {"review": "The pizza arrived cold."},
                             user="ana", model=model, registry=registry, storage=storage)
    assert run.status == "succeeded", run.error
    assert run.results["n1"]["sentiment"] == "negative"
    assert run.memory == {"reply": "We are sorry your order arrived cold. A refund is on its way."}
    from flowforge.storage import storage_from_url
    async with storage_from_url(storage) as store:
        assert (await store.get_memory("ana")) == run.memory
        assert (await store.get_run(run.run_id))["status"] == "succeeded"


async def test_a_block_that_never_passes_ends_the_build_with_a_clear_error(registry):
    from flowforge.providers.scripted import register_script, unregister_script
    import json

    def model(messages, tools):
        system = messages[0].content
        if "planner" in system:
            return json.dumps({"blocks": [{"name": "always_wrong", "description": "Adds one",
                                           "execution_type": "python",
                                           "input_schema": {"type": "object", "properties": {
                                               "x": {"type": "number"}}},
                                           "output_schema": {"type": "object", "properties": {
                                               "y": {"type": "number"}}}}]})
        return json.dumps({"source_code": "async def execute(inputs, context):\n"
                                          "    return {'y': inputs['x']}\n",
                           "examples": [{"inputs": {"x": 1}, "outputs": {"y": 2}}]})

    register_script("never-passes", model)
    try:
        result = await build("Add one to x", model="scripted/never-passes", registry=registry)
    finally:
        unregister_script("never-passes")
    assert not result.ok
    # A first attempt and three retries, each retry but the last announced as one.
    failures = [e for e in result.events if e["type"] == "block_test_failed"]
    assert [(e["attempt"], e["retry"]) for e in failures] == \
        [(1, True), (2, True), (3, True), (4, False)]
    assert {e["block_id"] for e in failures} == {"always_wrong"}
    assert result.failed == ["always_wrong"] and await registry.find("always_wrong") is None
    assert "could not write a block that passes its tests: always_wrong" in result.error
    assert result.events[-1]["type"] == "complete" and result.events[-1]["ok"] is False
