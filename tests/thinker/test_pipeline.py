"""Pipeline JSON <-> workflow documents, and its validation in pipeline terms."""

from __future__ import annotations

import pytest

from flowforge.errors import ValidationFailed
from flowforge.formats.pipeline_json import (pipeline_to_workflow, pipeline_warnings,
                                             validate_pipeline, workflow_to_pipeline)
from flowforge.service.pipeline import run_pipeline

PIPELINE = {
    "id": "Stats of numbers", "name": "Stats", "user_prompt": "Average some numbers",
    "nodes": [{"id": "n1", "block_id": "text_split",
               "inputs": {"text": "{{input.csv}}", "separator": ","}},
              {"id": "n2", "block_id": "math_stats", "inputs": {"numbers": "{{input.values}}"}},
              {"id": "n3", "block_id": "text_join",
               "inputs": {"items": "{{n1.items}}", "title": "Mean {{n2.mean}}"}}],
    "edges": [{"from": "n1", "to": "n3"}, {"from": "n2", "to": "n3"}],
    "memory_keys": ["text"],
}


def test_conversion_to_a_workflow_and_back(registry):
    doc = pipeline_to_workflow(PIPELINE)
    assert doc["id"] == "Stats-of-numbers" and doc["memory"] == ["text"]
    assert doc["inputs"] == {"csv": {"type": "string"},
                             "values": {"type": "array", "items": {"type": "number"}}}
    assert doc["blocks"][2] == {"id": "n3", "uses": "text_join", "after": ["n1", "n2"],
                                "with": {"items": "{{n1.items}}", "title": "Mean {{n2.mean}}"}}
    back = workflow_to_pipeline(doc)
    assert back["nodes"] == PIPELINE["nodes"] and back["edges"] == PIPELINE["edges"]


async def test_run_with_per_user_memory(registry, tmp_path):
    storage = f"sqlite:///{tmp_path / 'runs.db'}"
    result = await run_pipeline(PIPELINE, {"csv": "a,b", "values": [1, 2, 3]}, user="u1",
                                storage=storage)
    assert result.status == "succeeded", result.error
    assert result.results["n3"]["text"] == "Mean 2\n1. a\n2. b"
    assert result.memory == {"text": "Mean 2\n1. a\n2. b"}


@pytest.mark.parametrize("change, where, words", [
    ({"edges": [{"from": "n9", "to": "n3"}]}, "edges[0].from", "unknown node 'n9'"),
    ({"nodes": [{"id": "n1", "block_id": "nope", "inputs": {}}], "edges": []},
     "nodes[0].block_id", "no block 'nope'"),
    ({"nodes": [{"id": "n1", "block_id": "math_stats", "inputs": {}}], "edges": []},
     "nodes[0].inputs", "needs input 'numbers'"),
    ({"nodes": [{"id": "n1", "block_id": "math_stats", "inputs": {"numbers": [1]}},
                {"id": "n2", "block_id": "text_clean", "inputs": {"text": "{{n1.mean}}"}}],
      "edges": []}, "nodes[1].inputs.text", "is number but input 'text' of text_clean needs string"),
    ({"nodes": [{"id": "n1", "block_id": "text_clean", "inputs": {"text": "{{n2.text}}"}},
                {"id": "n2", "block_id": "text_clean", "inputs": {"text": "{{n1.text}}"}}],
      "edges": []}, "nodes[", "cycle"),
    ({"nodes": [{"id": "n1", "block_id": "text_clean", "inputs": {"text": "{{n7.text}}"}}],
      "edges": []}, "nodes[0].inputs.text", "unknown block 'n7'"),
])
def test_validation_problems_are_located_in_the_pipeline(registry, change, where, words):
    problems = [str(p) for p in validate_pipeline({**PIPELINE, **change})]
    assert any(where in p and words in p for p in problems), problems


def test_a_missing_output_field_is_a_located_warning_not_a_problem(registry):
    # The seed's format reads a missing field of a known node as None: the
    # pipeline is valid, and the reference is pointed out.
    pipeline = {**PIPELINE, "edges": [], "nodes": [
        {"id": "n1", "block_id": "math_stats", "inputs": {"numbers": [1]}},
        {"id": "n2", "block_id": "text_clean", "inputs": {"text": "{{n1.average}}"}}]}
    assert validate_pipeline(pipeline) == []
    warnings = [str(w) for w in pipeline_warnings(pipeline)]
    assert len(warnings) == 1 and warnings[0].startswith("nodes[1].inputs.text: 'n1' "
                                                         "(math_stats) has no output 'average'")
    assert "mean" in warnings[0]


async def test_an_invalid_pipeline_never_runs(registry):
    with pytest.raises(ValidationFailed, match="unknown node 'n9'"):
        await run_pipeline({**PIPELINE, "edges": [{"from": "n9", "to": "n3"}]}, storage=False)
