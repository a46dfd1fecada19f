"""The builder's HTTP routes on a real server (127.0.0.1), with the
scripted rules files of examples/build."""

from __future__ import annotations

import json

import pytest
from httpx_sse import EventSource

from tests.server.conftest import start_server
from tests.thinker.conftest import rules


@pytest.fixture
async def server(tmp_path, registry):
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    # the scripted rules files are files of the server: an administrator lets alice
    # build with them (without the grant the policy gate refuses them: test_gate_replay)
    async with live.client("admin") as admin:
        granted = await admin.post("/api/users/alice/grants",
                                   json={"capability": "server_files"})
        assert granted.status_code == 201, granted.text
    yield live
    await stop()


async def test_block_routes(server, registry):
    async with server.client("alice") as client:
        listed = (await client.get("/api/blocks", params={"execution_type": "llm"})).json()
        assert {b["id"] for b in listed["blocks"]} >= {"llm_summarise", "llm_classify"}
        assert all("prompt_template" not in b for b in listed["blocks"])
        source = (await client.get("/api/blocks/text_clean/source")).json()
        assert source["execution_type"] == "python" and "async def execute" in source["source"]
        found = (await client.post("/api/blocks/search",
                                   json={"query": "count the words", "limit": 2})).json()
        assert found["results"][0]["block"]["id"] == "text_word_count"
        assert found["mode"] == "text"
        new = {"id": "shout", "name": "Shout", "description": "Upper-cases a text.",
               "execution_type": "python",
               "source_code": "async def execute(inputs, context):\n"
                              "    return {'text': inputs['text'].upper()}\n",
               "metadata": {"created_by": "library"}}
        added = await client.post("/api/blocks", json=new)
        assert added.status_code == 201
        assert added.json()["block"]["metadata"]["created_by"] == "user"
        assert added.json()["block"]["version"] == 1
        bad = await client.post("/api/blocks", json={**new, "source_code": "import os"})
        assert bad.status_code == 422
        assert "module 'os' is not allowed" in json.dumps(bad.json())
        again = await client.post("/api/blocks", json={**new, "description": "Shouts."})
        assert again.json()["block"]["version"] == 2          # the owner may add versions
        # her own block of a shared id shadows the library's, for her alone
        own = await client.post("/api/blocks", json={**new, "id": "text_clean"})
        assert own.status_code == 201 and own.json()["block"]["version"] == 1
        shown = (await client.get("/api/blocks/text_clean")).json()
        assert shown["block"]["name"] == "Shout" and shown["shadows_shared"] is True
        missing = await client.get("/api/blocks/shuot")
        assert missing.status_code == 404 and "did you mean 'shout'" in missing.text
    async with server.client("bob") as bob:       # alice's ids are not bob's: he learns nothing
        library = (await bob.get("/api/blocks/text_clean")).json()
        assert library["block"]["metadata"]["created_by"] == "library"
        assert library["shadows_shared"] is False
        his = await bob.post("/api/blocks", json={**new, "description": "Mine"})
        assert his.status_code == 201 and his.json()["block"]["version"] == 1
        assert server.users["alice"]["user_id"] not in his.text
    async with server.client("admin") as admin:   # an administrator's block is shared
        shared = await admin.post("/api/blocks", json={**new, "description": "x"})
        assert shared.status_code == 201 and not shared.json()["block"]["metadata"].get("owner")
    async with server.client("alice") as client:
        assert (await client.get("/api/blocks/shout")).json()["block"]["description"] == \
            "Shouts."
    async with server.client(None) as anonymous:
        assert (await anonymous.get("/api/blocks")).status_code == 401


async def test_clarify_route_asks_one_question(server):
    async with server.client("alice") as client:
        answer = await client.post("/api/clarify", json={
            "conversation": [{"role": "user", "content": "Average Fahrenheit temperatures"}],
            "model": rules("temperature-average")})
        assert answer.json() == {"ready": False, "question": "Where do the temperatures come "
                                 "from, and in which unit should the average be?"}
        bad = await client.post("/api/clarify", json={"conversation": "hi"})
        assert bad.status_code == 422


async def test_create_agent_blocking_and_streaming(server, registry):
    body = {"intent": "Count the words of a text and summarise it",
            "model": rules("word-summary")}
    async with server.client("alice") as client:
        built = (await client.post("/api/create-agent", json=body)).json()
        assert built["ok"] and built["pipeline"]["nodes"][0]["block_id"] == "text_word_count"
        assert built["events"][-1]["type"] == "complete"
        assert built["result"]["status"] == "done"
        assert built["result"]["pipeline_json"] == built["pipeline"]
        events, names = [], []
        async with client.stream("POST", "/api/create-agent/stream", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for sse in EventSource(response).aiter_sse():
                if not sse.data:
                    continue                  # a ping (httpx-sse passes them on, empty)
                events.append(json.loads(sse.data))
                names.append(sse.event)
        kinds = [e["type"] for e in events]
        assert names == kinds                      # the SSE event name is the type
        assert kinds[:2] == ["start", "stage"] and kinds[-1] == "complete"
        assert {"llm_prompt", "llm_response", "decompose_blocks", "search_found",
                "stage_result", "validation"} <= set(kinds)
        assert all(isinstance(e["ts"], float) and e["time"].endswith("Z") for e in events)
        assert events[-1]["pipeline"] == built["pipeline"]
        assert events[-1]["result"]["pipeline_json"] == built["pipeline"]
        assert events[-1]["result"]["status"] == "done"
        # a browser's EventSource can only GET: the same stream from the query string
        got = []
        async with client.stream("GET", "/api/create-agent/stream",
                                 params=body) as response:
            assert response.status_code == 200
            async for sse in EventSource(response).aiter_sse():
                if sse.data:
                    got.append(json.loads(sse.data)["type"])
        assert got[0] == "start" and got[-1] == "complete"
        assert (await client.get("/api/create-agent/stream")).status_code == 422


async def test_the_blocks_a_users_build_writes_are_that_users(server, registry):
    """`/api/create-agent` once saved the blocks it wrote as shared blocks every
    user then saw (issue 23): now they are the building user's."""
    async with server.client("alice") as alice:
        built = (await alice.post("/api/create-agent", json={
            "intent": "Convert Fahrenheit temperatures to Celsius and give their average",
            "model": rules("temperature-average")})).json()
        assert built["created"] == ["fahrenheit_to_celsius"], built["error"]
        block = (await alice.get("/api/blocks/fahrenheit_to_celsius")).json()["block"]
    assert block["metadata"]["owner"] == server.users["alice"]["user_id"]
    async with server.client("bob") as bob:
        assert (await bob.get("/api/blocks/fahrenheit_to_celsius")).status_code == 404
        listed = (await bob.get("/api/blocks")).json()["blocks"]
        assert "fahrenheit_to_celsius" not in {b["id"] for b in listed}


async def test_an_administrators_build_writes_shared_blocks(server, registry):
    async with server.client("admin") as admin:
        built = (await admin.post("/api/create-agent", json={
            "intent": "Convert Fahrenheit temperatures to Celsius and give their average",
            "model": rules("temperature-average")})).json()
        assert built["created"] == ["fahrenheit_to_celsius"], built["error"]
    async with server.client("bob") as bob:
        block = (await bob.get("/api/blocks/fahrenheit_to_celsius")).json()["block"]
    assert not block["metadata"].get("owner")


async def test_automate_builds_then_runs_and_stores_the_run(server, registry):
    async with server.client("alice") as client:
        answer = (await client.post("/api/automate", json={
            "intent": "Convert Fahrenheit temperatures to Celsius and give their average",
            "input": {"temps_f": [32, 212]}, "model": rules("temperature-average")})).json()
        assert answer["build"]["created"] == ["fahrenheit_to_celsius"]
        assert answer["run"]["status"] == "succeeded"
        assert answer["run"]["results"]["n2"]["mean"] == 50.0
        stored = await client.get(f"/api/runs/{answer['run']['run_id']}")
        assert stored.status_code == 200
        created = (await client.get("/api/blocks/fahrenheit_to_celsius")).json()["block"]
    # a user's build writes that user's blocks, not shared ones (issue 23)
    assert created["metadata"]["owner"] == server.users["alice"]["user_id"]
    async with server.client("bob") as bob:
        assert (await bob.get("/api/blocks/fahrenheit_to_celsius")).status_code == 404
        listed = (await bob.get("/api/blocks")).json()["blocks"]
        assert "fahrenheit_to_celsius" not in {b["id"] for b in listed}


async def test_a_users_added_blocks_are_theirs(server, registry):
    """Blocks a user adds are visible to that user (and admins) only; another
    user's ids answer 404 and their runs cannot `uses:` them (issue 17)."""
    new = {"id": "whisper", "name": "Whisper", "description": "Lower-cases a text quietly.",
           "execution_type": "python",
           "source_code": "async def execute(inputs, context):\n"
                          "    return {'text': inputs['text'].lower()}\n"}
    document = {"id": "uses-whisper", "blocks": [
        {"id": "w", "uses": "whisper", "with": {"text": "HELLO"}}]}
    async with server.client("alice") as alice:
        assert (await alice.post("/api/blocks", json=new)).status_code == 201
        assert (await alice.get("/api/blocks/whisper")).status_code == 200
        await alice.post("/api/workflows", json=document)
        mine = (await alice.post("/api/workflows/uses-whisper/runs?wait=true", json={})).json()
    assert mine["status"] == "succeeded", mine["blocks"]
    async with server.client("bob") as bob:
        listed = (await bob.get("/api/blocks")).json()
        assert "whisper" not in {b["id"] for b in listed["blocks"]}
        assert (await bob.get("/api/blocks/whisper")).status_code == 404
        assert (await bob.get("/api/blocks/whisper/source")).status_code == 404
        found = (await bob.post("/api/blocks/search",
                                json={"query": "lower-cases a text quietly"})).json()
        assert "whisper" not in {r["block"]["id"] for r in found["results"]}
        theirs = await bob.post("/api/workflows", json=document)
    # another user's block is exactly like one that does not exist (issue 23)
    assert theirs.status_code == 422 and "no block 'whisper'" in theirs.text
    async with server.client("admin") as admin:     # an administrator asks for alice's view
        assert (await admin.get("/api/blocks/whisper")).status_code == 404
        alices = {"owner": server.users["alice"]["user_id"]}
        assert (await admin.get("/api/blocks/whisper", params=alices)).status_code == 200
        listed = (await admin.get("/api/blocks", params=alices)).json()["blocks"]
        assert "whisper" in {b["id"] for b in listed}
    async with server.client("bob") as bob:
        assert (await bob.get("/api/blocks", params=alices)).status_code == 403
