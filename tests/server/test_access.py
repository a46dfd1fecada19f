"""Keys and isolation: 401 without a valid key, another user's ids answer 404
exactly like unknown ones, an admin sees everyone's runs."""

from __future__ import annotations

import pytest

from flowforge.service.users import issue_key
from tests.server.conftest import chain


async def _alice_run(server) -> str:
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=1, seconds=0))
        response = await client.post("/api/workflows/chain/runs?wait=true", json={})
    return response.json()["run_id"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer ff_not-a-real-key"},
                                     {"Authorization": "Basic YWxpY2U6cHc="},
                                     {"Authorization": "Bearer"}])
async def test_a_missing_or_wrong_key_gets_401_json(server, headers):
    async with server.client(None) as client:
        response = await client.get("/api/runs", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"


async def test_health_and_the_openapi_document_need_no_key(server):
    async with server.client(None) as client:
        health = await client.get("/health")
        document = await client.get("/openapi.json")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert document.status_code == 200


async def test_a_revoked_key_stops_working_and_a_new_key_works(server):
    user = server.users["alice"]
    second = await issue_key(server.storage, user["user_id"])
    keys = await server.storage.list_api_keys(user["user_id"])
    await server.storage.revoke_api_key(keys[0]["key_id"])
    async with server.client(None) as client:
        old = await client.get("/api/me", headers={"Authorization":
                                                   f"Bearer {server.keys['alice']}"})
        new = await client.get("/api/me", headers={"Authorization": f"Bearer {second}"})
    assert old.status_code == 401
    assert new.status_code == 200 and new.json()["name"] == "alice"


@pytest.mark.parametrize("method, path", [
    ("GET", "/api/runs/{id}"), ("GET", "/api/runs/{id}/events"),
    ("POST", "/api/runs/{id}/cancel"), ("GET", "/api/runs/{id}/deliveries"),
    ("GET", "/api/executions/{id}"), ("GET", "/agent-workflow/{id}"),
    ("POST", "/agent-workflow/{id}/cancel")])
async def test_another_users_run_is_404_like_an_unknown_id(server, method, path):
    run_id = await _alice_run(server)
    async with server.client("bob") as client:
        theirs = await client.request(method, path.format(id=run_id))
        unknown = await client.request(method, path.format(id="0" * 32))
    assert theirs.status_code == 404 and unknown.status_code == 404
    assert theirs.json()["error"]["message"] == \
        unknown.json()["error"]["message"].replace("0" * 32, run_id)


async def test_workflows_are_private_to_their_owner(server):
    async with server.client() as alice, server.client("bob") as bob:
        await alice.post("/api/workflows", json=chain())
        seen = await bob.get("/api/workflows/chain")
        listed = await bob.get("/api/workflows")
        run = await bob.post("/api/workflows/chain/runs", json={})
        deleted = await bob.delete("/api/workflows/chain")
        other_owner = await bob.get(f"/api/workflows/chain?owner="
                                    f"{server.users['alice']['user_id']}")
        still = await alice.get("/api/workflows/chain")
    assert seen.status_code == 404 and run.status_code == 404 and deleted.status_code == 404
    assert listed.json()["workflows"] == []
    assert other_owner.status_code == 403
    assert still.status_code == 200


async def test_an_admin_sees_every_users_runs_and_workflows(server):
    run_id = await _alice_run(server)
    alice_id = server.users["alice"]["user_id"]
    async with server.client("admin") as admin, server.client("bob") as bob:
        detail = await admin.get(f"/api/runs/{run_id}")
        runs = (await admin.get("/api/runs")).json()["runs"]
        only_alice = (await admin.get(f"/api/runs?user={alice_id}")).json()["runs"]
        workflows = (await admin.get("/api/workflows?all=true")).json()["workflows"]
        workflow = await admin.get(f"/api/workflows/chain?owner={alice_id}")
        bob_filter = await bob.get(f"/api/runs?user={alice_id}")
        bob_all = await bob.get("/api/workflows?all=true")
    assert detail.status_code == 200 and detail.json()["user_id"] == alice_id
    assert [r["run_id"] for r in runs] == [run_id] == [r["run_id"] for r in only_alice]
    assert [(w["owner"], w["id"]) for w in workflows] == [(alice_id, "chain")]
    assert workflow.status_code == 200
    assert bob_filter.status_code == 403 and bob_all.status_code == 403


async def test_user_administration_is_for_admins(server):
    async with server.client("admin") as admin, server.client("bob") as bob:
        created = await admin.post("/api/users", json={"name": "carol"})
        duplicate = await admin.post("/api/users", json={"name": "carol"})
        bad_name = await admin.post("/api/users", json={"name": "no spaces please"})
        listed = (await admin.get("/api/users")).json()["users"]
        refused = await bob.post("/api/users", json={"name": "mallory"})
        me = (await bob.get("/api/me")).json()
    key = created.json()["api_key"]
    async with server.client(None) as client:
        carol = await client.get("/api/me", headers={"Authorization": f"Bearer {key}"})
    assert created.status_code == 201 and carol.json()["name"] == "carol"
    assert duplicate.status_code == 409 and "carol" in duplicate.json()["error"]["message"]
    assert bad_name.status_code == 422
    assert [u["name"] for u in listed] == ["admin", "alice", "bob", "carol"]
    assert all("webhook_secret" not in u and "api_key" not in u for u in listed)
    assert refused.status_code == 403
    assert me["name"] == "bob" and len(me["webhook_secret"]) == 64


async def test_memory_is_private_to_its_user(server):
    workflow = {"id": "remember", "memory": ["last_topic"], "inputs": {"topic": {}},
                "blocks": [{"id": "note", "type": "set",
                            "with": {"last_topic": "{{input.topic}}"}}]}
    async with server.client() as alice, server.client("bob") as bob, \
            server.client("admin") as admin:
        await alice.post("/api/workflows", json=workflow)
        await alice.post("/api/workflows/remember/runs?wait=true",
                         json={"inputs": {"topic": "refunds"}})
        by_name = (await alice.get("/api/memory/alice")).json()
        by_id = (await alice.get(f"/api/memory/{server.users['alice']['user_id']}")).json()
        bob_reads = await bob.get("/api/memory/alice")
        bob_own = (await bob.get("/api/memory/bob")).json()
        admin_reads = await admin.get("/api/memory/alice")
    assert by_name["memory"] == {"last_topic": "refunds"} == by_id["memory"]
    assert bob_reads.status_code == 404 and bob_own["memory"] == {}
    assert admin_reads.json()["memory"] == {"last_topic": "refunds"}
