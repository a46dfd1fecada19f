"""Webhooks: a signed JSON POST when a run ends, retried with backoff, every
attempt recorded.  A real receiver on loopback checks the signature the way a
user's service would; httpx.MockTransport scripts failures."""

from __future__ import annotations

import asyncio
import json

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from flowforge.server.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from tests.server.conftest import chain, serve_asgi, start_server


async def _deliveries(server, client, run_id: str, count: int) -> list[dict]:
    for _ in range(200):
        attempts = (await client.get(f"/api/runs/{run_id}/deliveries")).json()["attempts"]
        if len(attempts) >= count:
            return attempts
        await asyncio.sleep(0.02)
    raise AssertionError(f"expected {count} delivery attempts, got {attempts}")


async def test_a_real_receiver_gets_a_signed_result_it_can_verify(server):
    received: list[tuple[dict, bytes]] = []

    async def hook(request: Request) -> JSONResponse:
        received.append((dict(request.headers), await request.body()))
        return JSONResponse({"ok": True})

    url, stop = await serve_asgi(Starlette(routes=[Route("/hook", hook, methods=["POST"])]))
    try:
        async with server.client() as client:
            await client.post("/api/workflows", json=chain(count=2, seconds=0,
                                                           webhook=f"{url}/hook"))
            run = (await client.post("/api/workflows/chain/runs?wait=true", json={})).json()
            attempts = await _deliveries(server, client, run["run_id"], 1)
            secret = (await client.get("/api/me")).json()["webhook_secret"]
    finally:
        await stop()
    assert len(received) == 1
    headers, body = received[0]
    assert verify(secret, headers[TIMESTAMP_HEADER.lower()], body,
                  headers[SIGNATURE_HEADER.lower()])
    assert not verify("another secret", headers[TIMESTAMP_HEADER.lower()], body,
                      headers[SIGNATURE_HEADER.lower()])
    payload = json.loads(body)
    assert (payload["run_id"], payload["status"], payload["outputs"]) == \
        (run["run_id"], "succeeded", {"b1": {"value": "hi"}})
    assert payload["workflow_version"] == 1 and "events" not in payload
    assert [(a["attempt"], a["status_code"], a["succeeded"]) for a in attempts] == \
        [(1, 200, True)]


async def test_failed_deliveries_are_retried_with_backoff_and_each_attempt_recorded(tmp_path):
    answers = iter([500, 503, 200])
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(next(answers))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    live, stop = await start_server(f"sqlite:///{tmp_path / 'db.sqlite'}",
                                    webhook_client=client, webhook_backoff=0.1,
                                    webhook_attempts=4)
    try:
        async with live.client() as api:
            await api.post("/api/workflows", json=chain(count=1, seconds=0))
            run = (await api.post("/api/workflows/chain/runs?wait=true",
                                  json={"webhook": "http://hooks.invalid/run-done"})).json()
            attempts = await _deliveries(live, api, run["run_id"], 3)
    finally:
        await stop()
    assert [(a["attempt"], a["status_code"], a["succeeded"], a["error"]) for a in attempts] == \
        [(1, 500, False, "HTTP 500"), (2, 503, False, "HTTP 503"), (3, 200, True, None)]
    assert attempts[1]["created_at"] - attempts[0]["created_at"] >= 0.1
    assert attempts[2]["created_at"] - attempts[1]["created_at"] >= 0.2
    assert [r.headers["x-flowforge-delivery"] for r in seen] == \
        [f"{run['run_id']}/{n}" for n in (1, 2, 3)]
    assert all(r.url == "http://hooks.invalid/run-done" for r in seen)


async def test_an_unreachable_receiver_is_recorded_and_the_run_still_succeeds(server):
    with_closed_port = "http://127.0.0.1:9/hook"       # discard port: nothing listens
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=1, seconds=0,
                                                       webhook=with_closed_port))
        run = (await client.post("/api/workflows/chain/runs?wait=true", json={})).json()
        attempts = await _deliveries(server, client, run["run_id"], 3)
        detail = (await client.get(f"/api/runs/{run['run_id']}")).json()
    assert detail["status"] == "succeeded" and detail["webhook"] == with_closed_port
    assert [a["succeeded"] for a in attempts] == [False, False, False]
    assert all(a["status_code"] is None and "Connect" in a["error"] for a in attempts)


async def test_webhooks_to_internal_addresses_are_refused_before_anything_runs(tmp_path):
    # Without --allow-private-webhooks, a user must not be able to make the server
    # POST to its own network: loopback, private, link-local (cloud metadata).
    received: list[httpx.Request] = []
    client = httpx.AsyncClient(transport=httpx.MockTransport(
        lambda request: received.append(request) or httpx.Response(200)))
    live, stop = await start_server(f"sqlite:///{tmp_path / 'db.sqlite'}",
                                    webhook_client=client, allow_private_webhooks=False)
    try:
        async with live.client() as api:
            saved = await api.post("/api/workflows", json=chain(
                count=1, seconds=0, webhook="http://169.254.169.254/latest/meta-data"))
            assert saved.status_code == 422
            error = saved.json()["error"]
            assert error["code"] == "webhook_refused"
            assert error["message"].startswith("webhook (in the document): ")
            assert "169.254.169.254" in error["message"]
            assert "--allow-private-webhooks" in error["message"]
            assert (await api.get("/api/workflows/chain")).status_code == 404

            assert (await api.post("/api/workflows", json=chain(count=1, seconds=0))
                    ).status_code == 201
            refused = await api.post("/api/workflows/chain/runs",
                                     json={"webhook": "http://127.0.0.1:9/hook"})
            assert refused.status_code == 422
            assert refused.json()["error"]["message"].startswith(
                "webhook: webhook refused to call 'http://127.0.0.1:9/hook'")
            assert (await api.get("/api/runs")).json()["runs"] == []

            public = await api.post("/api/workflows/chain/runs?wait=true",
                                    json={"webhook": "http://93.184.216.34/hook"})
            assert public.status_code == 200
            await _deliveries(live, api, public.json()["run_id"], 1)
    finally:
        await stop()
    assert [str(r.url) for r in received] == ["http://93.184.216.34/hook"]


async def test_a_webhook_host_that_turns_internal_is_refused_at_delivery(tmp_path):
    from flowforge.server.webhooks import deliver_webhook
    from flowforge.storage import storage_from_url

    calls: list[httpx.Request] = []
    client = httpx.AsyncClient(transport=httpx.MockTransport(
        lambda request: calls.append(request) or httpx.Response(200)))
    storage = storage_from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    await storage.open()
    try:
        await storage.create_run({"run_id": "r1", "workflow_id": "w", "status": "succeeded",
                                  "inputs": {}, "created_at": 1.0, "document": {}})
        delivered = await deliver_webhook(storage, client, "r1", "http://10.1.2.3/hook",
                                          {"run_id": "r1"}, "secret", attempts=3, backoff=0)
        attempts = await storage.list_deliveries("r1")
    finally:
        await storage.close()
    assert delivered is False and calls == []
    assert [(a["attempt"], a["succeeded"]) for a in attempts] == [(1, False)]
    assert "10.1.2.3" in attempts[0]["error"] and "--allow-private-webhooks" in attempts[0]["error"]


async def test_a_runs_webhook_is_stored_with_its_row_not_after_it(server, monkeypatch):
    # A submission retried with its Idempotency-Key after the server died finds
    # the run's row: the webhook must already be in it, not in a later update.
    created: list[dict] = []
    create_run = server.storage.create_run

    async def spy(run: dict) -> None:
        created.append(dict(run))
        await create_run(run)

    monkeypatch.setattr(server.storage, "create_run", spy)
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=1, seconds=0,
                                                       webhook="https://example.com/hook"))
        run = (await client.post("/api/workflows/chain/runs", json={})).json()
    assert [(row["run_id"], row.get("webhook")) for row in created] == [
        (run["run_id"], "https://example.com/hook")]
