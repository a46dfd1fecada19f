"""Python blocks get the seed's `context`: run and block ids, `user`,
`user_id`, and the user's `memory` (read-only)."""

from __future__ import annotations

from flowforge.service.pipeline import run_pipeline
from flowforge.storage import storage_from_url

SOURCE = '''
async def execute(inputs, context):
    try:
        context["memory"]["topic"] = "changed"
        wrote = "yes"
    except TypeError:
        wrote = "refused"
    return {"user_id": context["user_id"], "user": dict(context["user"]),
            "memory": dict(context["memory"]), "ids": [context["run_id"] != "",
            context["block_id"]], "wrote": wrote, "topic": inputs["topic"]}
'''


async def test_a_python_block_sees_the_user_and_a_read_only_memory(registry, tmp_path):
    await registry.add({"id": "who_am_i", "name": "Who am I", "description": "Echoes its context.",
                        "execution_type": "python", "source_code": SOURCE,
                        "input_schema": {"type": "object", "properties": {"topic": {
                            "type": "string"}}},
                        "output_schema": {"type": "object", "properties": {
                            "topic": {"type": "string"}}, "additionalProperties": True}})
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with storage_from_url(url) as store:
        await store.save_memory("ana", {"topic": "cats", "visits": 2})
    pipeline = {"id": "who", "nodes": [{"id": "n1", "block_id": "who_am_i",
                                        "inputs": {"topic": "{{memory.topic}}"}}],
                "edges": [], "memory_keys": ["topic", "visits"]}
    run = await run_pipeline(pipeline, {}, user={"id": "ana", "name": "Ana"}, storage=url,
                             registry=registry)
    assert run.status == "succeeded", run.error
    out = run.results["n1"]
    assert out["user_id"] == "ana" and out["user"] == {"id": "ana", "name": "Ana"}
    assert out["memory"] == {"topic": "cats", "visits": 2}
    assert out["wrote"] == "refused"                 # memory is read-only to the block
    assert out["ids"] == [True, "n1"]
    assert out["topic"] == "cats"
    async with storage_from_url(url) as store:       # and the store is unchanged
        assert (await store.get_memory("ana")) == {"topic": "cats", "visits": 2}
