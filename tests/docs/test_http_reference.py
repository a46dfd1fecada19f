"""The HTTP reference (issue 44): every operation with its request body's
fields (each described) and an answer recorded from a live app, and the
WebSocket routes, whose documented messages and close codes are checked here
against a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import pytest
import websockets

from flowforge.providers.scripted import register_script, unregister_script
from tests.apps.conftest import knowledge, knowledge_path  # noqa: F401 - fixtures
from tests.apps.research_script import ResearchScript
from tests.server.conftest import chain, start_server

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))
import gen_http  # noqa: E402
import gen_common  # noqa: E402
import gen_reference  # noqa: E402


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("reference")
    gen_http.http_page(out, gen_common.docstring_markdown)
    return (out / "http.md").read_text()


def _sections(page: str) -> dict[str, str]:
    return dict(re.findall(r"^##+ `([^`]+)`\n(.*?)(?=^##+ |\Z)", page, re.M | re.S))


def test_every_operation_has_its_body_fields_described_and_a_recorded_answer(page):
    from flowforge.server.app import create_app

    schema = create_app().openapi()
    components = schema["components"]["schemas"]
    sections = _sections(page)
    operations = [(method, path, op) for path, ops in schema["paths"].items()
                  for method, op in ops.items()]
    assert len(operations) > 60
    for method, path, operation in operations:
        route = f"{method.upper()} {path}"
        section = sections[route]
        for content in operation.get("requestBody", {}).get("content", {}).values():
            for name, _, _, description in gen_http.body_fields(content.get("schema", {}),
                                                                components):
                assert description, f"{route}: body field `{name}` has no description"
                body = section.split("**Body**", 1)[1]         # not a path parameter's row
                row = re.search(rf"^\| `{re.escape(name)}` \|.*$", body, re.M)
                assert row and description[:40] in row.group(0), f"{route}: {name}"
        assert "**Example**" in section, route
        status = re.search(r"^Answer `(\d+)`", section, re.M)
        assert status and status.group(1).startswith("2"), route
    # what a reader relies on: a run's fields, its URLs, a chat answer's sources
    runs = sections["POST /api/workflows/{workflow_id}/runs"]
    assert '"run_id"' in runs and '"events_url"' in runs and '"Grace"' in runs
    assert '"sources"' in sections["POST /api/chat/query"]
    assert "event: " in sections["POST /api/chat/query/stream"]        # the SSE lines


def test_an_operation_without_a_recorded_answer_stops_the_generator(monkeypatch, tmp_path):
    examples = dict(gen_http.record())
    del examples["GET /api/runs"]
    monkeypatch.setattr(gen_http, "_EXAMPLES", examples)
    with pytest.raises(RuntimeError, match="GET /api/runs: no example was recorded"):
        gen_http.http_page(tmp_path, gen_common.docstring_markdown)


def test_every_websocket_route_has_its_messages_documented(page):
    sections = _sections(page)
    assert set(gen_http.websocket_routes()) == set(gen_http.WEBSOCKETS)
    for path in gen_http.WEBSOCKETS:
        section = sections[f"WS {path}"]
        for heading in ("the client sends", "the server sends", "close code"):
            assert f"| {heading} |" in section, (path, heading)


# -- what the WebSocket section says, against a real server -----------------------------

@pytest.fixture
async def live(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    server, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    yield server
    await stop()


async def _start(server, workflow, path="/api/workflows/{id}/runs") -> str:
    async with server.client() as client:
        assert (await client.post("/api/workflows", json=workflow)).status_code == 201
        answer = await client.post(path.format(id=workflow["id"]), json={})
        assert answer.status_code == 202, answer.text
        return answer.json()["run_id"]


def _documented_codes(path: str) -> set[int]:
    codes = ",".join(code for code, _ in gen_http.WEBSOCKETS[path]["ends"])
    return {int(c) for c in re.findall(r"\d+", codes)}


async def test_a_run_socket_sends_each_event_then_closes_1000(live):
    run_id = await _start(live, chain(count=2, seconds=0.01))
    headers = {"Authorization": f"Bearer {live.keys['alice']}"}
    async with websockets.connect(f"{live.ws_url}/ws/runs/{run_id}",
                                  additional_headers=headers) as socket:
        events = [json.loads(m) async for m in socket]
    assert socket.close_code == 1000 and 1000 in _documented_codes("/ws/runs/{run_id}")
    assert all({"seq", "type", "run_id", "time"} <= set(e) for e in events)
    assert events[-1]["type"] == "run_finished"
    # ?after= replays only what follows that seq
    async with websockets.connect(f"{live.ws_url}/ws/runs/{run_id}?after={events[1]['seq']}",
                                  additional_headers=headers) as socket:
        rest = [json.loads(m) async for m in socket]
    assert rest == events[2:]


async def test_cancel_and_unknown_messages_are_answered_as_documented(live):
    workflow = chain(count=2, seconds=0.01)
    workflow["blocks"][1]["with"]["args"]["seconds"] = 30
    run_id = await _start(live, workflow)
    url = f"{live.ws_url}/ws/runs/{run_id}"
    messages = []
    async with websockets.connect(url, subprotocols=["flowforge",
                                                     f"bearer.{live.keys['alice']}"]) as socket:
        assert socket.subprotocol == "flowforge"           # the browser's way in
        await socket.send("pause")
        async for raw in socket:
            message = json.loads(raw)
            messages.append(message)
            if message.get("type") == "error":
                await socket.send(json.dumps({"type": "cancel"}))
    kinds = [m["type"] for m in messages]
    error = next(m for m in messages if m["type"] == "error")
    assert error["error"]["code"] and "cancel" in error["error"]["message"]
    assert {"type": "cancel_requested", "run_id": run_id} in messages
    assert kinds[-1] == "run_finished" and messages[-1]["status"] == "cancelled"
    assert socket.close_code == 1000


@pytest.mark.parametrize("who, query, code", [(None, "", 4401), ("bob", "", 4404),
                                              ("alice", "&after=soon", 4400)])
async def test_refused_connections_say_why_then_close_with_the_documented_code(
        live, who, query, code):
    run_id = await _start(live, chain(count=1, seconds=0))
    url = f"{live.ws_url}/ws/runs/{run_id}?token={live.keys[who] if who else 'nope'}{query}"
    async with websockets.connect(url) as socket:
        message = json.loads(await socket.recv())
        with pytest.raises(websockets.ConnectionClosed):
            await socket.recv()
    assert message["type"] == "error" and message["error"]["message"]
    assert socket.close_code == code and code in _documented_codes("/ws/runs/{run_id}")


async def test_a_workflow_session_socket_sends_the_runs_events(live):
    async with live.client() as client:
        await client.post("/api/workflows", json=chain(count=2, seconds=0.01))
        session = (await client.post("/agent-workflow", json={"workflow_id": "chain"})).json()
    url = f"{live.ws_url}{session['websocket_url']}?token={live.keys['alice']}"
    async with websockets.connect(url) as socket:
        events = [json.loads(m) async for m in socket]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert socket.close_code == 1000


async def test_a_research_session_socket_sends_the_documented_messages(
        tmp_path, knowledge, knowledge_path, monkeypatch):  # noqa: F811 - fixtures
    """status, phase (started, completed with its result), then complete;
    each with type, session_id, seq and progress; closed 1000."""
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{knowledge_path}")
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    played = ResearchScript({"question_eval": [0.9], "kb_eval": [0.9], "answer_eval": [0.9]})
    register_script("manual_research", played)
    server, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}",
                                      model="scripted/manual_research")
    try:
        async with server.client() as client:
            session = (await client.post("/agent-workflow",
                                         json={"question": "tent wind?"})).json()
        url = f"{server.ws_url}{session['websocket_url']}?token={server.keys['alice']}"
        async with websockets.connect(url) as socket:
            messages = await asyncio.wait_for(_all(socket), 120)
    finally:
        await stop()
        unregister_script("manual_research")
    documented = gen_http.WEBSOCKETS["/ws/agent-workflow/{session_id}"]["server"][1][1]
    for message in messages:
        assert {"type", "session_id", "seq", "progress"} <= set(message), message
        assert f"`{message['type']}`" in documented, message["type"]
    phases = [(m["phase"], m["status"]) for m in messages if m["type"] == "phase"]
    assert ("question", "started") in phases and ("answer", "completed") in phases
    assert all("result" in m for m in messages if m["type"] == "phase"
               and m["status"] == "completed")
    assert messages[-1]["type"] == "complete" and messages[-1]["progress"] == 100
    assert "answer" in messages[-1]["result"] and socket.close_code == 1000


async def _all(socket) -> list[dict]:
    return [json.loads(m) async for m in socket]
