"""`Idempotency-Key` on `POST /api/workflows/{id}/runs`: a client that lost
the answer sends the request again and gets the run it started, never a
second one; a key is the user's own; a reused key with another request and a
malformed key are refused, saying why."""

from __future__ import annotations

import asyncio

import pytest

from tests.server.conftest import chain, wait_for_status

RUNS = "/api/workflows/chain/runs"


async def _save(client, **extra) -> None:
    saved = await client.put("/api/workflows/chain", json=chain(count=2, seconds=0.01, **extra))
    assert saved.status_code in (200, 201), saved.text


async def _runs_of(live, user: str) -> list[dict]:
    return await live.storage.list_runs(user_id=live.users[user]["user_id"])


async def test_the_same_key_again_answers_the_first_run_with_200(server):
    async with server.client("alice") as alice:
        await _save(alice)
        first = await alice.post(RUNS, json={"inputs": {"word": "x"}},
                                 headers={"Idempotency-Key": "order-1"})
        assert first.status_code == 202, first.text
        assert "idempotent-replayed" not in first.headers
        run_id = first.json()["run_id"]
        await wait_for_status(server, run_id, "succeeded")
        again = await alice.post(RUNS, json={"inputs": {"word": "x"}},
                                 headers={"Idempotency-Key": "order-1"})
        assert again.status_code == 200, again.text
        assert again.headers["idempotent-replayed"] == "true"
        shown = again.json()
        assert shown["run_id"] == run_id and shown["status"] == "succeeded"
        assert shown["status_url"] == f"/api/runs/{run_id}"
        # the result too, with ?wait=true, of the same run
        waited = await alice.post(f"{RUNS}?wait=true", json={"inputs": {"word": "x"}},
                                  headers={"Idempotency-Key": "order-1"})
        assert waited.status_code == 200 and waited.json()["run_id"] == run_id
        assert waited.json()["outputs"] == {"b1": {"value": "x"}}
        assert [r["run_id"] for r in await _runs_of(server, "alice")] == [run_id]
        # the run keeps its key (the owner sees it with the run)
        assert (await alice.get(f"/api/runs/{run_id}")).json()["idempotency_key"] == "order-1"


async def test_a_key_first_sent_with_wait_answers_the_same_result(server):
    async with server.client("alice") as alice:
        await _save(alice)
        first = await alice.post(f"{RUNS}?wait=true", json={},
                                 headers={"Idempotency-Key": "k"})
        assert first.status_code == 200 and first.json()["status"] == "succeeded"
        again = await alice.post(f"{RUNS}?wait=true", json={},
                                 headers={"Idempotency-Key": "k"})
        assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
        assert again.json()["run_id"] == first.json()["run_id"]
        assert again.json()["outputs"] == first.json()["outputs"]


async def test_the_same_key_with_another_request_is_refused_naming_the_header(server):
    async with server.client("alice") as alice:
        await _save(alice)
        first = await alice.post(RUNS, json={"inputs": {"word": "x"}},
                                 headers={"Idempotency-Key": "order-2"})
        assert first.status_code == 202
        for other in ({"inputs": {"word": "y"}}, {"inputs": {"word": "x"}, "version": 1},
                      {"inputs": {"word": "x"}, "budget": {"tokens": 10}}):
            refused = await alice.post(RUNS, json=other, headers={"Idempotency-Key": "order-2"})
            assert refused.status_code == 422, refused.text
            error = refused.json()["error"]
            assert error["code"] == "idempotency_key_reused"
            assert "Idempotency-Key 'order-2'" in error["message"]
            assert first.json()["run_id"] in error["message"]
        # the same request written differently is the same request
        same = await alice.post(RUNS, json={"version": None, "inputs": {"word": "x"}},
                                headers={"Idempotency-Key": "order-2"})
        assert same.status_code == 200 and same.json()["run_id"] == first.json()["run_id"]
        assert len(await _runs_of(server, "alice")) == 1


async def test_keys_belong_to_their_user(server):
    async with server.client("alice") as alice, server.client("bob") as bob:
        await _save(alice)
        await _save(bob)
        ran_alice = await alice.post(RUNS, json={}, headers={"Idempotency-Key": "shared"})
        ran_bob = await bob.post(RUNS, json={"inputs": {"word": "other"}},
                                 headers={"Idempotency-Key": "shared"})
        assert (ran_alice.status_code, ran_bob.status_code) == (202, 202)
        assert ran_alice.json()["run_id"] != ran_bob.json()["run_id"]
        assert len(await _runs_of(server, "alice")) == len(await _runs_of(server, "bob")) == 1


@pytest.mark.parametrize("key, fix", [("", "empty"),
                                      ("k" * 256, "at most 255"),
                                      ("caf\u00e9", "printable ASCII")])
async def test_a_malformed_key_is_a_400_saying_how_to_fix_it(server, key, fix):
    async with server.client("alice") as alice:
        await _save(alice)
        refused = await alice.post(RUNS, json={},
                                   headers={"Idempotency-Key": key.encode("latin-1")})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_idempotency_key"
        assert "Idempotency-Key" in error["message"] and fix in error["message"]
        assert await _runs_of(server, "alice") == []
        longest = await alice.post(RUNS, json={}, headers={"Idempotency-Key": "k" * 255})
        assert longest.status_code == 202


async def test_requests_racing_with_one_key_make_one_run(any_server):
    """On SQLite and PostgreSQL: many clients at once, one run per key, and
    every one of them is told that run's id."""
    async with any_server.client("alice") as alice:
        await _save(alice)
        for attempt in range(3):
            answers = await asyncio.gather(*(
                alice.post(RUNS, json={"inputs": {"word": "w"}},
                           headers={"Idempotency-Key": f"race-{attempt}"}) for _ in range(6)))
            codes = sorted(a.status_code for a in answers)
            assert codes == [200] * 5 + [202], [a.text for a in answers]
            assert len({a.json()["run_id"] for a in answers}) == 1
        assert len(await _runs_of(any_server, "alice")) == 3


async def test_racing_requests_with_one_key_and_different_bodies_start_one_and_refuse_one(
        server):
    async with server.client("alice") as alice:
        await _save(alice)
        answers = await asyncio.gather(
            alice.post(RUNS, json={"inputs": {"word": "a"}}, headers={"Idempotency-Key": "x"}),
            alice.post(RUNS, json={"inputs": {"word": "b"}}, headers={"Idempotency-Key": "x"}))
        assert sorted(a.status_code for a in answers) == [202, 422]
        assert len(await _runs_of(server, "alice")) == 1


async def test_the_openapi_document_declares_the_header(server):
    async with server.client(None) as anonymous:
        document = (await anonymous.get("/openapi.json")).json()
    for path in ("/api/workflows/{workflow_id}/runs", "/api/agent", "/agent-workflow",
                 "/api/pipeline/run", "/api/pipelines/{pipeline_id}/run"):
        operation = document["paths"][path]["post"]
        header = [p for p in operation["parameters"] if p["in"] == "header"]
        assert [p["name"] for p in header] == ["Idempotency-Key"], path
        assert "same key" in header[0]["description"]
        assert "Idempotency-Key" in operation["responses"]["200"]["description"], path
    assert "Idempotency-Key" in document["info"]["description"]


async def test_a_key_stored_between_the_check_and_the_insert_answers_the_stored_run(
        server, monkeypatch):
    """The window the unique index closes, made to happen every time: the second
    request's look-up runs before the first request's run is stored."""
    from flowforge.server import idempotency

    looked_up: list[str] = []
    real_look_up = idempotency.earlier_run

    async def late_look_up(request, user, key, fingerprint):
        looked_up.append(key)
        if len(looked_up) <= 2:                  # both requests' first look: nothing yet
            return None
        return await real_look_up(request, user, key, fingerprint)

    monkeypatch.setattr(idempotency, "earlier_run", late_look_up)
    async with server.client("alice") as alice:
        await _save(alice)
        first = await alice.post(RUNS, json={}, headers={"Idempotency-Key": "window"})
        second = await alice.post(RUNS, json={}, headers={"Idempotency-Key": "window"})
    assert (first.status_code, second.status_code) == (202, 200), second.text
    assert second.json()["run_id"] == first.json()["run_id"]
    assert second.headers["idempotent-replayed"] == "true"
    assert looked_up == ["window"] * 3           # the second looked again after the insert
    assert len(await _runs_of(server, "alice")) == 1


async def test_a_repeat_with_wait_while_the_run_runs_waits_for_that_run(server):
    async with server.client("alice") as alice:
        saved = await alice.put("/api/workflows/chain", json=chain(count=3, seconds=0.2))
        assert saved.status_code in (200, 201)
        first = await alice.post(RUNS, json={}, headers={"Idempotency-Key": "slow"})
        assert first.status_code == 202
        waited = await alice.post(f"{RUNS}?wait=true", json={},
                                  headers={"Idempotency-Key": "slow"})
        assert waited.status_code == 200 and waited.headers["idempotent-replayed"] == "true"
        assert waited.json()["run_id"] == first.json()["run_id"]
        assert waited.json()["status"] == "succeeded"
        assert waited.json()["outputs"] == {"b2": {"value": "hi"}}


PIPELINE = {"id": "clean", "nodes": [{"id": "n1", "block_id": "text_clean",
                                      "inputs": {"text": "{{input.text}}"}}],
            "edges": [], "memory_keys": []}

# every other route that starts one run: (path, body, another body, the run id's field,
# the first answer's status)
ROUTES = {
    "agent task": ("/api/agent", {"workflow_id": "chain", "variables": {"word": "x"}},
                   {"workflow_id": "chain", "variables": {"word": "y"}}, "id", 202),
    "agent-workflow session": ("/agent-workflow", {"workflow_id": "chain", "inputs": {"word": "x"}},
                               {"workflow_id": "chain", "inputs": {"word": "y"}},
                               "session_id", 202),
    "pipeline run": ("/api/pipeline/run", {**PIPELINE, "input": {"text": " a  b "}},
                     {**PIPELINE, "input": {"text": "c"}}, "execution_id", 200),
    "saved pipeline run": ("/api/pipelines/clean/run", {"input": {"text": " a  b "}},
                           {"input": {"text": "c"}}, "execution_id", 200),
}


@pytest.mark.parametrize("route", ROUTES)
async def test_every_route_that_starts_a_run_takes_a_key(server, monkeypatch, route):
    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")   # no embedding model needed
    path, body, other, field, status = ROUTES[route]
    async with server.client("alice") as alice:
        await _save(alice)
        saved = await alice.post("/api/pipelines", json=PIPELINE)
        assert saved.status_code == 201, saved.text
        first = await alice.post(path, json=body, headers={"Idempotency-Key": "route-1"})
        assert first.status_code == status, first.text
        assert "idempotent-replayed" not in first.headers
        run_id = first.json()[field]
        await wait_for_status(server, run_id, "succeeded")
        again = await alice.post(path, json=body, headers={"Idempotency-Key": "route-1"})
        assert again.status_code == 200, again.text
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()[field] == run_id
        if status == 200:                        # a route answering the result: the same
            assert again.json()["results"] == first.json()["results"]
        refused = await alice.post(path, json=other, headers={"Idempotency-Key": "route-1"})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "idempotency_key_reused"
        assert run_id in refused.json()["error"]["message"]
        # a key is the user's across routes: another route's request is another request
        elsewhere = await alice.post(RUNS, json={"inputs": {"word": "x"}},
                                     headers={"Idempotency-Key": "route-1"})
        assert elsewhere.status_code == 422, elsewhere.text
        malformed = await alice.post(path, json=body, headers={"Idempotency-Key": "k" * 256})
        assert malformed.status_code == 400, malformed.text
        assert [r["run_id"] for r in await _runs_of(server, "alice")] == [run_id]
