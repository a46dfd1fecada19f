"""A WebSocket key never reaches a log (issue 23): a browser authenticates
through `Sec-WebSocket-Protocol` (`flowforge, bearer.<key>`), which no log
shows and the server never echoes; an old client's `?token=<key>` still
works, and the server's log shows it as `token=***`."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket

import httpx
import uvicorn
import websockets

from flowforge.server import ServerSettings, create_app
from flowforge.server.log_redaction import redact_query
from flowforge.service.users import create_user
from flowforge.storage import storage_from_url
from tests.server.conftest import chain


async def _start(client, workflow: dict) -> str:
    assert (await client.post("/api/workflows", json=workflow)).status_code == 201
    return (await client.post(f"/api/workflows/{workflow['id']}/runs?wait=true",
                              json={})).json()["run_id"]


async def test_a_browser_authenticates_with_the_subprotocol(server):
    async with server.client() as client:
        run_id = await _start(client, chain(count=2, seconds=0))
    key = server.keys["alice"]
    async with websockets.connect(f"{server.ws_url}/ws/runs/{run_id}",
                                  subprotocols=["flowforge", f"bearer.{key}"]) as ws:
        events = [json.loads(message) async for message in ws]
        assert ws.subprotocol == "flowforge"              # the key is never echoed
        assert key not in str(ws.response.headers)
    assert events[-1]["type"] == "run_finished" and ws.close_code == 1000
    async with websockets.connect(f"{server.ws_url}/ws/runs/{run_id}",
                                  subprotocols=["flowforge", "bearer.ff_wrong"]) as ws:
        refusal = json.loads(await ws.recv())
        await asyncio.wait_for(ws.wait_closed(), 5)
    assert refusal["type"] == "error" and ws.close_code == 4401
    assert "bearer.<key>" in refusal["error"]["message"]


def test_credentials_in_query_strings_are_cut_from_log_lines():
    assert redact_query('GET /ws/runs/r1?after=3&token=ff_abc-DEF_1 HTTP/1.1') == \
        'GET /ws/runs/r1?after=3&token=*** HTTP/1.1'
    assert redact_query("/x?ticket=t1&api_key=k&q=1&key=z") == \
        "/x?ticket=***&api_key=***&q=1&key=***"
    assert redact_query("/health?monkey=1") == "/health?monkey=1"


async def test_the_servers_log_never_shows_a_key(tmp_path):
    storage = storage_from_url(f"sqlite:///{tmp_path / 's.db'}")
    await storage.open()
    _, key = await create_user(storage, "alice", "user")
    app = create_app(ServerSettings(), storage=storage)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="info", access_log=True))
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    loggers = [logging.getLogger(name) for name in ("uvicorn.access", "uvicorn.error")]
    for logger in loggers:
        logger.addHandler(handler)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url,
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            run_id = await _start(client, chain(count=1, seconds=0))
            assert (await client.get(f"/api/runs?token={key}")).status_code == 200
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/runs/{run_id}?token={key}") \
                as ws:
            events = [json.loads(message) async for message in ws]
        assert events[-1]["type"] == "run_finished"          # an old client still works
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()
        await storage.close()
    log = captured.getvalue()
    assert f"/ws/runs/{run_id}?token=***" in log and "/api/runs?token=***" in log
    assert key not in log
