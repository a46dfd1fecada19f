"""`flowforge blocks ...` and `flowforge build ...` as a user types them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flowforge.cli.main import app
from tests.thinker.conftest import rules

runner = CliRunner()


def invoke(*args, input=None):
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)


def test_blocks_list_show_source_search(registry):
    listed = json.loads(invoke("blocks", "list", "--json", "--type", "llm").stdout)
    assert {b["id"] for b in listed} == {"llm_summarise", "llm_extract", "llm_classify",
                                        "llm_rewrite"}
    shown = json.loads(invoke("blocks", "show", "math_stats", "--json").stdout)
    assert shown["version"] == 1 and shown["metadata"]["created_by"] == "library"
    assert "statistics.median" in invoke("blocks", "source", "math_stats").stdout
    found = json.loads(invoke("blocks", "search", "average of numbers", "--json").stdout)
    assert found["results"][0]["block"]["id"] == "math_stats"
    missing = invoke("blocks", "show", "math_stat")
    assert missing.exit_code == 1 and "did you mean 'math_stats'" in missing.stderr  # not found: 1


def test_blocks_add_and_test(registry, tmp_path):
    good = tmp_path / "shout.yaml"
    good.write_text("""
id: shout
name: Shout
description: Upper-cases a text.
execution_type: python
input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
source_code: |
  async def execute(inputs, context):
      return {"text": inputs["text"].upper()}
examples:
  - {inputs: {text: hi}, outputs: {text: HI}}
""")
    added = invoke("blocks", "add", str(good))
    assert added.exit_code == 0 and "added shout version 1" in added.stdout
    assert invoke("blocks", "test", "shout").exit_code == 0
    good.write_text(good.read_text().replace("outputs: {text: HI}", "outputs: {text: Hi}"))
    assert "version 2" in invoke("blocks", "add", str(good)).stdout
    failed = invoke("blocks", "test", "shout", "--json")
    assert failed.exit_code == 1
    assert "expected {'text': 'Hi'}" in json.loads(failed.stdout)["results"][0]["error"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("return", "import os\n      return"))
    refused = invoke("blocks", "add", str(bad))
    assert refused.exit_code == 2 and "module 'os' is not allowed" in refused.stderr


def test_build_asks_its_question_in_the_terminal_then_builds_and_runs(registry, tmp_path,
                                                                     monkeypatch):
    from flowforge.cli import build as build_cli

    monkeypatch.setattr(build_cli, "has_terminal", lambda: True)   # the runner types for us
    output = tmp_path / "pipeline.json"
    result = invoke("build", "Average some Fahrenheit temperatures",
                    "--model", rules("temperature-average"), "-o", str(output), "--run",
                    "-i", "temps_f=[32, 212]", "--json",
                    input="A list I give at run time; the average in Celsius\n")
    assert result.exit_code == 0, result.stderr
    assert "Where do the temperatures come from" in result.stderr
    assert "Goal: Convert Fahrenheit temperatures to Celsius" in result.stderr
    assert "test failed fahrenheit_to_celsius" in result.stderr
    answer = json.loads(result.stdout.splitlines()[-1])   # (the runner echoes the typed answer)
    assert answer["build"]["created"] == ["fahrenheit_to_celsius"]
    assert answer["run"]["results"]["n2"]["mean"] == 50.0
    saved = json.loads(output.read_text())
    assert saved == answer["build"]["pipeline"]
    ran = invoke("run", str(output), "-i", "temps_f=[50]", "--json", "--no-store")
    assert ran.exit_code == 0 and json.loads(ran.stdout)["results"]["n1"]["temps_c"] == [10.0]


def test_a_failed_build_exits_1(registry):
    result = invoke("build", "anything", "--yes", "--model", "scripted/no-such-rules.yaml")
    assert result.exit_code == 1
    assert "build failed" in result.stderr


def test_build_without_a_terminal_asks_nothing_and_says_to_pass_yes(registry):
    result = invoke("build", "Average some temperatures", "--model", "local/smollm2")
    assert result.exit_code == 2
    assert "pass --yes" in result.stderr
    assert "plans poorly" in result.stderr and "--model openai/gpt-4o" in result.stderr
    assert "local/smollm2 (SmolLM2-135M-Instruct, 135M parameters) plans poorly" in " ".join(
        result.stderr.split())


@pytest.mark.parametrize("model", ["local/qwen2.5-0.5b", "local/qwen2.5-coder-0.5b-instruct"])
def test_the_note_on_a_local_build_model_names_that_model(registry, model):
    """By any of its names: an alias of Qwen was 'an embedded model', and the note
    said of every local model what was measured of SmolLM2."""
    result = invoke("build", "Average some temperatures", "--model", model)
    assert result.exit_code == 2
    said = " ".join(result.stderr.split())
    assert f"{model} (Qwen2.5-Coder-0.5B-Instruct, 0.5B parameters)" in said
    assert "135M" not in said


def test_the_plan_check_is_called_the_plan_not_the_wiring():
    from flowforge.cli.build import describe_event

    line = describe_event({"type": "validation", "stage": "decompose", "ok": True,
                           "problems": []})
    assert line == "  plan valid"
    assert "wiring invalid" in describe_event({"type": "validation", "stage": "wire",
                                               "ok": False, "problems": ["nodes[0]: x"]})
