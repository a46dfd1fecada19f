"""What validation promises (issue 15): a document `validate` accepts never
fails at run time for a reason validation could have known, and the mistakes
users make are caught before a run, located, with a did-you-mean."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, seed, settings

import flowforge
from flowforge.errors import ValidationFailed, WorkflowError
from tests.workflow.fuzzing import documents

CONFIG_REASONS = ("validation error for", "Field required", "Input should be",
                  "Extra inputs are not permitted", "unknown field")


def _problems(document: dict) -> list[str]:
    try:
        flowforge.load(document)
    except ValidationFailed as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize("block, expected", [
    ({"id": "r", "type": "response", "with": {"mesage": "{{input.q}}"}},
     "blocks[0].with.mesage: unknown field 'mesage' - did you mean 'message'?"),
    ({"id": "a", "type": "agent", "with": {"sytem": "{{input.q}}", "prompt": "hi"}},
     "blocks[0].with.sytem: unknown field 'sytem' - did you mean 'system'?"),
    ({"id": "a", "type": "agent", "with": {"prompt": "hi", "model": "lokal/smollm2"}},
     "blocks[0].with.model: unknown provider 'lokal' in model 'lokal/smollm2' - did you mean "
     "'local/smollm2'?"),
    ({"id": "a", "type": "agent", "with": {"prompt": "hi", "model": "house-model"}},
     "blocks[0].with.model: model 'house-model' does not name a provider"),
    ({"id": "g", "type": "condition", "with": {"cases": [{"when": "1 > 0", "goto": "revew"}],
                                               "default": "r"}},
     "blocks[0].with.cases[0].goto: unknown target block 'revew'"),
])
def test_mistakes_are_caught_before_a_run(block, expected):
    document = {"id": "x", "inputs": {"q": {"type": "string", "default": "?"}},
                "blocks": [block, {"id": "r", "type": "set", "with": {"v": 1}}]}
    problems = _problems(document)
    assert any(p.startswith(expected) for p in problems), problems


def test_unknown_input_types_are_caught_with_a_did_you_mean():
    assert _problems({"id": "x", "inputs": {"n": {"type": "numbr"}}, "blocks": []}) == [
        "inputs.n.type: unknown type 'numbr' - did you mean 'number'?; JSON Schema types: "
        "string, number, integer, boolean, object, array, null"]


def test_metric_ranges_in_both_forms():
    for range_ in ([0, 5], {"min": 0, "max": 5}):
        assert _problems({"id": "x", "blocks": [{"id": "e", "type": "evaluator", "with": {
            "content": "c", "metrics": [{"name": "A", "range": range_}]}}]}) == []


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@seed(15)
@given(documents())
def test_what_validate_accepts_never_fails_for_a_config_reason(document):
    try:
        compiled = flowforge.load_text(document, "doc.yaml") if isinstance(document, str) \
            else flowforge.load(document)
    except WorkflowError:
        return

    async def attempt():
        return await asyncio.wait_for(flowforge.run(compiled, {}, storage=False,
                                                    model="scripted/echo"), 10)
    try:
        result = asyncio.run(attempt())
    except (asyncio.TimeoutError, flowforge.FlowforgeError):
        return
    reasons = [record.error or "" for record in result.blocks.values()] + [result.error or ""]
    assert not [r for r in reasons if any(c in r for c in CONFIG_REASONS)], reasons


def test_agent_tool_options_are_checked_before_a_run():
    """The chat's tool entries are validated like any field: located, with did-you-mean,
    and a templated value is not a problem."""
    from flowforge.errors import ValidationFailed
    from flowforge.service.loading import load

    doc = {"id": "w", "inputs": {"kb": {"type": "string"}}, "blocks": [
        {"id": "a", "type": "agent", "with": {"prompt": "hi", "tools": [
            {"rag_search": {"knowledge_bse": "x"}},
            {"web_search": {"backend": "bing"}},
            {"rag_search": {"knowledge_base": "{{input.kb}}", "top_k": "{{input.kb}}"}},
            {"final_response": {}}]}}]}
    with pytest.raises(ValidationFailed) as caught:
        load(doc)
    found = [str(p) for p in caught.value.problems]
    assert found == [
        "blocks[0].with.tools[0].rag_search.knowledge_bse: unknown field 'knowledge_bse' - "
        "did you mean 'knowledge_base'?; allowed: knowledge_base, knowledge_bases, top_k, "
        "max_top_k, mode, min_similarity, filters",
        "blocks[0].with.tools[1].web_search.backend: Value error, unknown backend 'bing': use "
        "offline, perplexity or tavily"]
