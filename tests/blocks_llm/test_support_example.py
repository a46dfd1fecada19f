"""examples/support.yaml, the main demo, with its scripted rules: each
question takes the route its scores call for, and only that branch runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import flowforge

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULES = f"scripted/{EXAMPLES / 'scripted' / 'support.rules.yaml'}"


@pytest.mark.parametrize("query, route, statuses", [
    ("Can I get a refund on an order I placed three weeks ago?", "standard",
     {"question": "succeeded", "search": "succeeded", "answer": "succeeded",
      "grade": "succeeded", "triage": "succeeded", "standard": "succeeded",
      "review": "skipped"}),
    ("I bought a jacket on sale, can I get my money back?", "review",
     {"question": "succeeded", "search": "succeeded", "answer": "succeeded",
      "grade": "succeeded", "triage": "succeeded", "standard": "skipped",
      "review": "succeeded"}),
])
async def test_support_routes_by_scores(query, route, statuses):
    result = await flowforge.run(EXAMPLES / "support.yaml", {"query": query}, storage=False,
                                 model=RULES)
    assert {bid: record.status for bid, record in result.blocks.items()} == statuses
    assert result.status == "succeeded"
    assert list(result.outputs) == [route]
    assert result.outputs[route]["data"]["route"] == route
    grade = result.results["grade"]
    scores = {k: grade[k] for k in ("accuracy", "completeness", "clarity")}
    assert scores == ({"accuracy": 9, "completeness": 8, "clarity": 9} if route == "standard"
                      else {"accuracy": 4, "completeness": 5, "clarity": 8})
    assert result.results["triage"]["selectedPath"]["blockTitle"] == (
        "Standard Response" if route == "standard" else "Needs Review")
    search = result.results["search"]
    assert 1 <= search["totalResults"] <= 3
    assert all(set(r["metadata"]["tags"]["category"]) & {"policies", "legal"}
               for r in search["results"])
    if route == "standard":       # "refund on an order placed three weeks ago"
        assert search["results"][0]["documentName"] == "Refund Policy"
        data = result.outputs["standard"]["data"]      # the seed's standard response
        assert data["timestamp"].endswith("Z")
        assert data["sources"] == [r["documentName"] for r in search["results"]]
    answer_prompt = next(e for e in result.events if e["type"] == "llm_request"
                         and e["block_id"] == "answer")
    sent = "\n".join(m["content"] or "" for m in answer_prompt["request"]["messages"])
    assert search["results"][0]["content"] in sent
    answer = result.results["answer"]
    assert answer["content"] in (result.outputs[route].get("message"),
                                 result.outputs[route]["data"].get("draft"))
    assert set(result.usage["blocks"]) == {"search", "answer", "grade", "triage"}
    assert result.usage["blocks"]["search"]["tokens"]["total"] == 0   # local embeddings
    assert result.usage["tokens"]["total"] == sum(
        result.results[b]["tokens"]["total"] for b in ("answer", "grade", "triage")) > 0


def test_support_runs_on_the_default_model():
    """It names no model: `make demo` answers on the default embedded model
    (local/qwen2.5-0.5b once installed, else local/smollm2)."""
    compiled = flowforge.load(EXAMPLES / "support.yaml")
    assert "model" not in compiled.doc.defaults
    assert not any("model" in spec.with_ for spec in compiled.doc.blocks)
