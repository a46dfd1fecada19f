"""Big documents neither stall the server nor grow without bound (issue 41):
past `max_document_blocks` a document is refused with a located problem;
a big one is parsed and compiled in another process while the server
answers other requests."""

from __future__ import annotations

import asyncio

import pytest

from tests.server.conftest import start_server


def _document(blocks: int, workflow_id: str = "big") -> dict:
    return {"id": workflow_id, "inputs": {"x": {"type": "string"}},
            "blocks": [{"id": f"b{i}", "type": "set",
                        "with": {"v": f"{{{{input.x}}}} {i}", "n": i}} for i in range(blocks)]}


@pytest.fixture
async def roomy(tmp_path):
    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}",
                                    max_body_bytes=1024 * 1024, max_document_blocks=400)
    yield live
    await stop()


async def test_a_document_past_the_block_limit_is_refused_at_its_place(roomy):
    document = _document(401)
    document["blocks"][0] = {"id": "each", "type": "loop", "with": {"times": 2},
                             "blocks": [{"id": "inner", "type": "set", "with": {"v": 1}}]}
    async with roomy.client() as client:
        saved = await client.post("/api/workflows", json=document)
        checked = await client.post("/api/validate", json=document)
    assert saved.status_code == 422, saved.text
    [problem] = saved.json()["error"]["details"]
    assert problem["where"] == "blocks"
    assert problem["message"].startswith("the document has 402 blocks, more than the 400 "
                                         "this server takes (FLOWFORGE_MAX_DOCUMENT_BLOCKS, "
                                         "`flowforge serve --max-document-blocks`)")
    assert checked.json()["valid"] is False
    assert checked.json()["problems"][0]["message"] == problem["message"]


async def test_a_big_document_is_compiled_in_another_process_while_health_answers(roomy):
    compiler = roomy.app.state.live.workflows.compiler
    async with roomy.client() as client, roomy.client(None) as anonymous:
        save = asyncio.create_task(client.post("/api/workflows", json=_document(300)))
        answered = 0
        while not save.done():
            assert (await anonymous.get("/health")).status_code == 200
            answered += 1
            await asyncio.sleep(0.01)
        saved = save.result()
        assert saved.status_code == 201, saved.text
        # a worker parsed the body and compiled the document
        assert compiler.jobs == 2 and compiler._executor is not None
        # /health was answered while the save was in progress (the worker starts, then
        # compiles: the server's loop was free meanwhile)
        assert answered >= 1
        checked = await client.post("/api/validate", json=_document(300))
        assert checked.json()["valid"] is True and len(checked.json()["graph"]["nodes"]) == 300
        assert compiler.jobs == 3
        ran = await client.post("/api/workflows/big/runs?wait=true",
                                json={"inputs": {"x": "hi"}})
        assert ran.json()["status"] == "succeeded"
        assert ran.json()["results"]["b299"] == {"v": "hi 299", "n": 299}


async def test_a_big_documents_problems_come_back_from_the_worker_located(roomy):
    document = _document(300)
    document["blocks"][250]["with"]["v"] = "{{nowhere.value}}"
    async with roomy.client() as client:
        saved = await client.post("/api/workflows", json=document)
        checked = await client.post("/api/validate", json=document)
    assert saved.status_code == 422
    assert any(p["where"].startswith("blocks[250]") for p in saved.json()["error"]["details"])
    assert checked.json()["valid"] is False
    assert any(p["where"].startswith("blocks[250]") for p in checked.json()["problems"])
    assert roomy.app.state.live.workflows.compiler.jobs == 3    # parse, compile; check
