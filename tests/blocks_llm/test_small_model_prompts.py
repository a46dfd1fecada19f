"""The evaluator's prompt for an embedded model (issue 47: the support demo in
30 s on two cores, where each prompt token costs ~22 ms): what its grammar
already enforces is not said in words.  A scripted model that asks for the
guided form (`Provider.guided_answers`) plays the embedded one; a hosted
model's prompt stays whole (tests/blocks_llm/test_router_evaluator_guardrail.py)."""

from __future__ import annotations

import pytest

from flowforge.providers.scripted import FunctionProvider

from .helpers import requests, run_blocks, scripted

JSON_FORM = "Answer with only a JSON object whose keys are the lower-case metric keys"


@pytest.fixture(params=[False, True], ids=["hosted", "embedded"])
def embedded(request, monkeypatch):
    monkeypatch.setattr(FunctionProvider, "guided_answers", request.param)
    return request.param


async def test_the_evaluator_leaves_the_json_form_to_the_grammar(embedded):
    with scripted(lambda messages, tools: '{"accuracy": 8}') as model:
        result = await run_blocks([{"id": "grade", "type": "evaluator", "with": {
            "content": "Refunds take 5 days.", "model": model,
            "metrics": [{"name": "Accuracy", "description": "Agrees with the policy"}]}}])
    assert result.results["grade"]["accuracy"] == 8
    system = requests(result, "grade")[0]["messages"][0]["content"]
    assert "- accuracy: Accuracy - Agrees with the policy (a number from 0 to 10)" in system
    assert system.endswith("Content to evaluate:\nRefunds take 5 days.")
    assert (JSON_FORM in system) is not embedded
