"""Block ids per user on a real server (issue 23): alice and bob each save a
block under the same id with different inputs, and each validates, runs,
lists, shows and deletes only their own; another user's id answers byte for
byte what an id nobody holds answers."""

from __future__ import annotations

import json

import pytest

from flowforge.registry import Registry, set_registry
from tests.server.conftest import start_server

JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def server(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")
    registry = Registry.open(f"sqlite:///{tmp_path / 'registry.db'}")
    set_registry(registry)
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    yield live
    await stop()
    set_registry(None)
    registry.close()


def _block(block_id: str, field: str, description: str) -> dict:
    return {"id": block_id, "name": "Same", "description": description,
            "execution_type": "python",
            "input_schema": {"type": "object", "required": [field],
                             "properties": {field: {"type": "string"}}},
            "source_code": f"async def execute(inputs, context):\n"
                           f"    return {{'got': '{field}:' + inputs['{field}']}}\n"}


def _uses(block_id: str, field: str) -> dict:
    return {"id": "uses-same", "blocks": [{"id": "b", "type": "registry", "uses": block_id,
                                           "with": {field: "hello"}}]}


async def test_each_user_validates_runs_lists_shows_and_deletes_only_their_own(server):
    async with server.client("alice") as alice, server.client("bob") as bob:
        for client, field in ((alice, "apple"), (bob, "banana")):
            saved = await client.post("/api/blocks",
                                      json=_block("same_id", field, f"{field} counter"))
            assert saved.status_code == 201, saved.text
            assert saved.json()["block"]["version"] == 1
        for client, mine, theirs in ((alice, "apple", "banana"), (bob, "banana", "apple")):
            valid = await client.post("/api/validate", headers=JSON,
                                      content=json.dumps(_uses("same_id", mine)))
            assert valid.json()["valid"] is True, valid.text
            wrong = await client.post("/api/validate", headers=JSON,
                                      content=json.dumps(_uses("same_id", theirs)))
            assert wrong.json()["valid"] is False and theirs in wrong.text
            assert (await client.post("/api/workflows",
                                      json=_uses("same_id", mine))).status_code == 201
            run = (await client.post("/api/workflows/uses-same/runs?wait=true",
                                     json={})).json()
            assert run["status"] == "succeeded", run["blocks"]
            assert run["results"]["b"]["got"] == f"{mine}:hello"
            listed = [b for b in (await client.get("/api/blocks")).json()["blocks"]
                      if b["id"] == "same_id"]
            assert [b["description"] for b in listed] == [f"{mine} counter"]
            shown = (await client.get("/api/blocks/same_id")).json()
            assert shown["block"]["input_schema"]["required"] == [mine]
            assert shown["shadows_shared"] is False
            assert theirs not in (await client.get("/api/blocks/same_id/source")).text
        assert (await bob.delete("/api/blocks/same_id")).status_code == 204
        assert (await bob.get("/api/blocks/same_id")).status_code == 404
        assert (await bob.delete("/api/blocks/same_id")).status_code == 404
        still = (await alice.get("/api/blocks/same_id")).json()["block"]
        assert still["input_schema"]["required"] == ["apple"]
        library = await alice.delete("/api/blocks/text_clean")      # shared: not hers to delete
        assert library.status_code == 403 and "administrator" in library.text
        assert (await alice.get("/api/blocks/text_clean")).status_code == 200


async def test_another_users_id_answers_exactly_like_an_unknown_one(server):
    async def answers(client) -> list[tuple[int, bytes]]:
        replies = [await client.get("/api/blocks/alice_only"),
                   await client.get("/api/blocks/alice_only/source"),
                   await client.get("/api/blocks/alice_only", params={"version": 1}),
                   await client.delete("/api/blocks/alice_only"),
                   await client.post("/api/validate", headers=JSON,
                                     content=json.dumps(_uses("alice_only", "apple"))),
                   await client.post("/api/blocks/search",
                                     json={"query": "secret orchard inventory"}),
                   await client.get("/api/blocks")]
        return [(reply.status_code, reply.content) for reply in replies]

    async with server.client("bob") as bob:
        before = await answers(bob)
        async with server.client("alice") as alice:
            saved = await alice.post("/api/blocks", json=_block(
                "alice_only", "apple", "Secret orchard inventory"))
            assert saved.status_code == 201
            assert (await alice.get("/api/blocks/alice_only")).status_code == 200
        after = await answers(bob)
    assert after == before
    assert [status for status, _ in before[:4]] == [404, 404, 404, 404]
