"""What a local model reads of an evaluator's answer schema: each metric's
description once (its system prompt lists them), not twice (issue 47)."""

from __future__ import annotations

import pytest

from flowforge.blocks.evaluator import Metric, metrics_schema
from flowforge.providers._local_prompt import chat_messages
from flowforge.providers.base import LLMRequest, Message

from .helpers import run_blocks, scripted


def test_the_evaluator_s_metrics_are_described_once_to_a_guided_model():
    """Its system prompt lists every metric with its description; the schema a
    guided (embedded) model is shown leaves them out, a hosted model's keeps them."""
    metrics = [Metric(name="Accuracy", description="Agrees with the policy", range=[0, 10])]
    hosted = metrics_schema(metrics)
    guided = metrics_schema(metrics, described=False)
    assert hosted["properties"]["accuracy"]["description"].startswith("Agrees with the policy")
    assert guided["properties"]["accuracy"] == {"type": "number", "minimum": 0, "maximum": 10}
    request = LLMRequest(model="local/qwen2.5-0.5b", response_format=guided,
                         messages=[Message("system", "- accuracy: Agrees with the policy")])
    assert chat_messages(request)[0]["content"].count("Agrees with the policy") == 1


@pytest.mark.parametrize("guided", [True, False])
async def test_the_evaluator_sends_descriptions_only_to_a_model_that_needs_them(
        guided, monkeypatch):
    from flowforge.blocks._llm import ModelCalls

    monkeypatch.setattr(ModelCalls, "guided", lambda self: guided)
    with scripted({"rules": [{"system": "evaluation agent", "reply": {"accuracy": 8}}]}) as model:
        result = await run_blocks([{"id": "grade", "type": "evaluator", "with": {
            "content": "Returns within 30 days.", "model": model,
            "metrics": [{"name": "Accuracy", "description": "Agrees with the policy",
                         "range": [0, 10]}]}}])
    assert result.results["grade"]["accuracy"] == 8
    sent = next(e for e in result.events if e["type"] == "llm_request")["request"]
    assert ("description" in sent["response_format"]["properties"]["accuracy"]) is not guided
    assert "Agrees with the policy" in sent["messages"][0]["content"]
