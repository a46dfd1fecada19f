"""Environment variables a run reads (for a user granted `server_env`) never
reach its record, its answers, its streams or its webhook."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.echo_server import echo_server, sending
from tests.server.conftest import read_sse, start_server

SECRET = "tok-0123456789-very-secret"


async def test_environment_values_are_never_written_or_sent(tmp_path, monkeypatch):
    monkeypatch.setenv("FF_SERVER_TEST_TOKEN", SECRET)
    posted: list[bytes] = []

    def hook(request: httpx.Request) -> httpx.Response:
        posted.append(request.content)
        return httpx.Response(200)

    live, stop = await start_server(f"sqlite:///{tmp_path / 'db.sqlite'}",
                                    webhook_client=httpx.AsyncClient(
                                        transport=httpx.MockTransport(hook)))
    echo = echo_server()
    url = echo.__enter__()
    # A value of the server's environment goes only where a credential goes: a header.
    workflow = {"id": "calls-api", "webhook": "http://hooks.invalid/x", "blocks": [
        sending("header", url, "Bearer {{env.FF_SERVER_TEST_TOKEN}}"),
        {"id": "done", "type": "response", "with": {"message": "{{header.data.auth}}"}}]}
    # Reading the server's environment is a capability an administrator grants.
    for capability in ("server_env", "private_network"):
        await live.storage.add_grant(f"user:{live.users['alice']['user_id']}", capability)
    try:
        async with live.client() as client:
            computed = {"id": "computes", "blocks": [{"id": "header", "type": "set", "with": {
                "authorization": "Bearer {{env.FF_SERVER_TEST_TOKEN}}"}}]}
            refused = await client.post("/api/workflows", json=computed)
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["details"][0]["where"] == \
                "blocks[0].with.authorization"
            assert "may only go where a credential goes" in refused.text
            await client.post("/api/workflows", json=workflow)
            answer = await client.post("/api/workflows/calls-api/runs?wait=true", json={})
            run_id = answer.json()["run_id"]
            texts = [answer.text,
                     (await client.get(f"/api/runs/{run_id}")).text,
                     json.dumps(await read_sse(client, f"/api/runs/{run_id}/events")),
                     (await client.get(f"/api/executions/{run_id}")).text,
                     (await client.get("/api/runs")).text]
            for _ in range(100):
                if posted:
                    break
                await asyncio.sleep(0.02)
        stored = [await live.storage.get_run(run_id), await live.storage.get_events(run_id),
                  await live.storage.get_blocks(run_id)]
    finally:
        await stop()
        echo.__exit__(None, None, None)
    assert answer.json()["status"] == "succeeded"
    assert "Bearer ***" in answer.text
    assert posted and b"Bearer ***" in posted[0]
    for text in [*texts, json.dumps(stored), *(p.decode() for p in posted)]:
        assert SECRET not in text
    raw = b"".join(path.read_bytes() for path in tmp_path.glob("db.sqlite*"))
    assert raw and SECRET.encode() not in raw
