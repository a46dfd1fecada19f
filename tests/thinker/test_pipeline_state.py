"""The doer answers the seed's PipelineState:
{pipeline_id, results, user, memory, log: [{node, block, output}]}."""

from __future__ import annotations

from flowforge.service.pipeline import run_pipeline_state

PIPELINE = {"id": "clean-count",
            "nodes": [{"id": "n1", "block_id": "text_clean", "inputs": {"text": "{{input.text}}"}},
                      {"id": "n2", "block_id": "text_word_count",
                       "inputs": {"text": "{{n1.text}}"}},
                      {"id": "n3", "block_id": "text_word_count",
                       "inputs": {"text": "{{input.other}}"}}],
            "edges": [{"from": "n1", "to": "n2"}], "memory_keys": ["text"]}


async def test_the_doer_returns_the_pipeline_state(registry):
    state = await run_pipeline_state(PIPELINE, {"text": "<p>Hi   there</p>", "other": "a b c"},
                                     user={"id": "ana", "name": "Ana"}, storage=False,
                                     registry=registry)
    data = state.model_dump()
    assert set(data) == {"pipeline_id", "results", "user", "memory", "log"}
    assert data["pipeline_id"] == "clean-count" and data["user"] == {"id": "ana", "name": "Ana"}
    assert data["results"]["n2"]["words"] == 2 and data["results"]["n3"]["words"] == 3
    assert data["memory"] == {"text": "Hi there"}
    assert sorted((e["node"], e["block"]) for e in data["log"]) == [
        ("n1", "text_clean"), ("n2", "text_word_count"), ("n3", "text_word_count")]
    order = [e["node"] for e in data["log"]]
    assert order.index("n1") < order.index("n2")          # in the order the nodes finished
    assert all(e["output"] == data["results"][e["node"]] for e in data["log"])
