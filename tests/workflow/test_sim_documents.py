"""Documents written the Sim-style block executor's way load, validate and
run as written (issue 42): hyphenated and UUID block ids in references and
expressions, bare model names, Sim's tool shape and tag filters, `type:
trigger`, a response's `metadata`."""

from __future__ import annotations

import importlib
import time

import pytest

import flowforge
from flowforge.errors import ValidationFailed
from flowforge.workflow import expressions

UUID = "3f2a9c1e-7b4d-4e8a-9f0c-1d2e3f4a5b6c"


def gated(source_id: str, when: str) -> dict:
    return {"id": "gate", "blocks": [
        {"id": source_id, "type": "set", "with": {"accuracy": 9}},
        {"id": "triage", "type": "condition",
         "with": {"cases": [{"when": when, "goto": "standard"}], "default": "review"}},
        {"id": "standard", "type": "response",
         "with": {"message": f"accuracy {{{{{source_id}.accuracy}}}}"}},
        {"id": "review", "type": "response", "with": {"message": "review"}}]}


@pytest.mark.parametrize("source_id, when", [
    ("evaluator-1", "evaluator-1.accuracy >= 8"),
    ("evaluator-1", "{{evaluator-1.accuracy}} >= 8"),
    ("evaluator-1", "10-evaluator-1.accuracy <= 2"),          # 10 minus the field
    (UUID, f"{UUID}.accuracy >= 8"),
    (UUID, f"{{{{{UUID}.accuracy}}}} >= 8"),
], ids=["hyphen", "hyphen-braced", "hyphen-subtracted", "uuid", "uuid-braced"])
def test_hyphenated_and_uuid_ids_work_in_templates_and_conditions(source_id, when):
    result = flowforge.run_sync(gated(source_id, when), {}, storage=False)
    assert result.status == "succeeded", result.error
    assert result.outputs == {"standard": {"message": "accuracy 9", "status": 200}}
    assert result.blocks["review"].status == "skipped"


def test_a_hyphenated_id_in_a_set_expression_and_the_reference_it_makes():
    doc = {"id": "calc", "blocks": [
        {"id": "grade-a", "type": "set", "with": {"score": 4}},
        {"id": "double", "type": "set", "with": {"value": {"expr": "grade-a.score * 2"},
                                                  "label": "'grade-a.score' stays text"}}]}
    compiled = flowforge.load(doc)
    assert "grade-a" in compiled.graph.nodes["double"].inputs     # an edge, from the expression
    result = flowforge.run_sync(compiled, {}, storage=False)
    assert result.results["double"]["value"] == 8


def test_subtraction_with_spaces_and_numbers_before_a_hyphen_are_unchanged():
    assert expressions.compile_expression("a - b.c").evaluate(
        {"a": 5, "b": {"c": 2}}) == 3
    assert expressions.compile_expression("3-loop.index").evaluate({"loop": {"index": 1}}) == 2
    assert expressions.compile_expression("'x-y.z' + \"a-b.c\"").evaluate({}) == "x-y.za-b.c"
    assert sorted(expressions.names_in("evaluator-1.accuracy >= 8 and x.y")) == [
        ("evaluator-1", "accuracy"), ("x", "y")]


def test_the_did_you_mean_hint_suggests_a_spelling_that_works():
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(gated("evaluator-1", "evaluator_1.accuracy >= 8"))
    message = str(caught.value)
    assert "unknown block 'evaluator_1' in evaluator_1.accuracy >= 8 - did you mean " \
           "'evaluator-1'?" in message
    fixed = gated("evaluator-1", "evaluator-1.accuracy >= 8")      # as the hint says
    assert flowforge.run_sync(fixed, {}, storage=False).status == "succeeded"


def test_an_unknown_hyphenated_root_says_how_to_write_a_subtraction():
    doc = gated("score", "score.accuracy >= 8")
    doc["blocks"][1]["with"]["cases"][0]["when"] = "lo-hi.x > 1"
    with pytest.raises(ValidationFailed, match=r"unknown block 'lo-hi' in lo-hi.x > 1 \(a "
                                               r"subtraction is written with spaces"):
        flowforge.load(doc)


@pytest.mark.parametrize("text", ["a-" * 50_000 + "a", "1-" * 50_000, '"' + "a-" * 50_000,
                                  "'" * 50_000, "a-b" * 30_000 + ".c"])
def test_reading_ids_in_an_expression_is_linear(text):
    started = time.perf_counter()
    expressions._name_ids(text)
    assert time.perf_counter() - started < 1.0


# -- bare model names ---------------------------------------------------------------------

@pytest.fixture
def fake_openai():
    """`openai/...` answered in this process (no network), put back afterwards."""
    from flowforge.providers import resolve
    from flowforge.providers.scripted import FunctionProvider

    importlib.import_module("flowforge.providers.openai")   # its real factory, registered
    before = resolve._FACTORIES["openai"]
    sent: list[str] = []

    def factory(name, options):
        sent.append(name)
        return FunctionProvider(lambda messages, tools: "hello from the fake"), name
    resolve.register_provider("openai", factory)
    resolve.clear_provider_cache()
    yield sent
    resolve.register_provider("openai", before)
    resolve.clear_provider_cache()


@pytest.mark.parametrize("bare, full", [
    ("gpt-4o", "openai/gpt-4o"), ("o3-mini", "openai/o3-mini"),
    ("claude-3-5-sonnet-latest", "anthropic/claude-3-5-sonnet-latest"),
    ("gemini-1.5-pro", "google/gemini-1.5-pro"),
    ("llama3.1", "openai-compatible/ollama/llama3.1"),
    ("qwen2.5:7b", "openai-compatible/ollama/qwen2.5:7b")])
def test_a_bare_model_name_of_a_known_family_is_read_with_its_provider(bare, full):
    doc = {"id": "m", "blocks": [{"id": "ask", "type": "agent",
                                  "with": {"model": bare, "prompt": "hi"}}]}
    compiled = flowforge.load(doc)
    assert compiled.doc.blocks[0].with_["model"] == full
    assert [str(w) for w in compiled.graph.warnings] == [
        f"blocks[0].with.model: '{bare}' read as {full}"]


def test_every_place_a_model_is_named_is_read_so_and_the_run_uses_it(fake_openai):
    doc = {"id": "m", "defaults": {"model": "gpt-4o", "fallback": ["gpt-4o-mini"]},
           "blocks": [{"id": "ask", "type": "agent", "with": {
               "prompt": "hi", "tools": [{"block": {"type": "llm", "name": "draft",
                                                    "with": {"model": "gpt-4.1"}}}]}}]}
    compiled = flowforge.load(doc)
    assert {str(w) for w in compiled.graph.warnings} == {
        "defaults.model: 'gpt-4o' read as openai/gpt-4o",
        "defaults.fallback[0]: 'gpt-4o-mini' read as openai/gpt-4o-mini",
        "blocks[0].with.tools[0].block.with.model: 'gpt-4.1' read as openai/gpt-4.1"}
    result = flowforge.run_sync(compiled, {}, storage=False)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == "hello from the fake"
    assert fake_openai == ["gpt-4o"]


def test_validate_prints_what_it_chose(tmp_path):
    from tests import in_process

    path = tmp_path / "bare.yaml"
    path.write_text("id: bare\nblocks:\n  - id: ask\n    type: agent\n"
                    "    with: {model: gpt-4o, prompt: hi}\n", encoding="utf-8")
    proc = in_process.flowforge("validate", str(path), env={"OPENAI_API_KEY": "sk-test"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "blocks[0].with.model: 'gpt-4o' read as openai/gpt-4o" in \
        " ".join(proc.stderr.split())


@pytest.mark.parametrize("bare, expected", [
    ("gtp-4o", "model 'gtp-4o' is not a model name flowforge knows without its provider - "
               "did you mean 'openai/gpt-4o'?"),
    ("claud-sonnet-4-5", "did you mean 'anthropic/claude-sonnet-4-5'?"),
    ("mymodel", "model 'mymodel' does not name a provider: write '<provider>/<model>'")])
def test_an_unknown_bare_name_stays_an_error_with_a_did_you_mean(bare, expected):
    doc = {"id": "m", "blocks": [{"id": "ask", "type": "agent",
                                  "with": {"model": bare, "prompt": "hi"}}]}
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(doc)
    assert "blocks[0].with.model" in str(caught.value) and expected in str(caught.value)


# -- the start block and the response's metadata ----------------------------------------------

@pytest.mark.parametrize("start_type", ["trigger", "starter"])
def test_sims_start_block_is_the_runs_entry(start_type):
    doc = {"id": "sim-start", "inputs": {"query": {"type": "string"}}, "blocks": [
        {"id": "start", "type": start_type, "name": "Start"},
        {"id": "reply", "type": "response", "with": {
            "message": "you asked: {{start.query}}",
            "metadata": {"source": "{{start.query}}", "version": 2}}}]}
    compiled = flowforge.load(doc)
    assert compiled.graph.nodes["start"].type == "input"
    result = flowforge.run_sync(compiled, {"query": "refunds?"}, storage=False)
    assert result.status == "succeeded", result.error
    assert result.results["start"]["query"] == "refunds?"
    assert result.outputs == {"reply": {"message": "you asked: refunds?", "status": 200,
                                        "metadata": {"source": "refunds?", "version": 2}}}


def test_the_start_blocks_other_names_are_not_listed_as_types():
    from flowforge.blocks.type_table import block_types

    assert "trigger" in block_types() and "trigger" not in list(block_types())


def test_a_bare_model_name_given_to_a_run_or_resolved_from_a_template_is_read_too():
    """`--model gpt-4o` and a `model: "{{input.model}}"` that resolves to a
    bare name reach the same provider a document's `model: gpt-4o` does."""
    import asyncio

    import flowforge
    from flowforge.blocks._llm import choose_model

    class Context:
        model_override = "claude-3-5-sonnet-latest"
        defaults: dict = {}

    assert choose_model(Context(), "openai/gpt-4o") == "anthropic/claude-3-5-sonnet-latest"
    Context.model_override = None
    assert choose_model(Context(), "llama3.1") == "openai-compatible/ollama/llama3.1"
    doc = {"version": 1, "id": "m", "inputs": {"model": {"type": "string"}},
           "blocks": [{"id": "ask", "type": "llm",
                       "with": {"model": "{{input.model}}", "prompt": "hi"}}]}
    result = asyncio.run(flowforge.run(doc, {"model": "gpt-4o"}, storage=False))
    assert result.status == "failed"                      # no key here: but it tried openai
    assert "OPENAI_API_KEY" in result.blocks["ask"].error
