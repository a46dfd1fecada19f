"""Research sessions over HTTP: POST /agent-workflow {question} starts the
orchestrator; the WebSocket sends status / phase / complete / error events;
cancel (over the WebSocket or POST .../cancel) ends the run `cancelled` with
the finished phases kept; a failing phase reaches the client as an error
event on a socket that closes normally."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from flowforge.providers.scripted import register_script, unregister_script
from tests.apps.research_script import ResearchScript
from tests.server.conftest import start_server


@pytest.fixture
async def research_server(tmp_path, knowledge, knowledge_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{knowledge_path}")
    made = []

    async def make(scores=None, **options):
        played = ResearchScript(scores, **options)
        name = f"research_server_{id(played)}"
        register_script(name, played)
        live, stop = await start_server(f"sqlite:///{tmp_path / f'server{len(made)}.db'}",
                                        model=f"scripted/{name}")
        made.append((name, stop))
        live.script = played
        return live

    yield make
    for name, stop in made:
        await stop()
        unregister_script(name)


async def session_events(live, session, *, on_event=None, after=None):
    url = f"{live.ws_url}{session['websocket_url']}?token={live.keys['alice']}"
    if after is not None:
        url += f"&after={after}"
    events = []
    async with websockets.connect(url) as socket:
        async for message in socket:
            event = json.loads(message)
            events.append(event)
            if on_event is not None:
                await on_event(socket, event)
        code = socket.close_code
    return events, code


async def test_a_question_starts_a_research_session_followed_over_the_websocket(
        research_server):
    live = await research_server({"question_eval": [0.5, 0.9], "kb_eval": [0.9],
                                  "answer_eval": [0.9]})
    async with live.client("alice") as client:
        started = await client.post("/agent-workflow", json={"question": "tent wind?",
                                                             "kb": "policies",
                                                             "threshold": 0.8,
                                                             "max_iterations": 3})
        assert started.status_code == 202, started.text
        session = started.json()
        events, code = await session_events(live, session)
        status = (await client.get(session["status_url"])).json()
        # a client that reconnects after the question phase gets the rest, progress right
        question_done = next(e for e in events if e["type"] == "phase"
                             and e["phase"] == "question" and e["status"] == "completed")
        rest, _ = await session_events(live, session, after=question_done["seq"])
    sid = session["session_id"]
    assert [(e["type"], e.get("phase"), e["progress"]) for e in rest[:1]] == [
        ("phase", "knowledge", 33)]
    assert rest == events[events.index(question_done) + 1:]
    assert session["status_url"] == f"/agent-workflow/{sid}"
    assert session["websocket_url"] == f"/ws/agent-workflow/{sid}"
    assert session["cancel_url"] == f"/agent-workflow/{sid}/cancel"
    assert code == 1000
    assert events[0]["type"] == "status" and events[0]["status"] == "running"
    assert [(e["phase"], e["status"], e["progress"]) for e in events if e["type"] == "phase"] \
        == [("question", "started", 0), ("question", "completed", 33),
            ("knowledge", "started", 33), ("knowledge", "completed", 66),
            ("answer", "started", 66), ("answer", "completed", 100)]
    assert [(e["phase"], e["iteration"], e["score"]) for e in events if "score" in e] == [
        ("question", 1, 0.5), ("question", 2, 0.9), ("knowledge", 1, 0.9), ("answer", 1, 0.9)]
    done = events[-1]
    assert done["type"] == "complete" and done["status"] == "succeeded"
    assert done["result"]["answer"].endswith("(refined 1).")     # refined before deciding
    assert done["result"]["final_answer"] == done["result"]["answer"]   # the seed's names too
    assert done["result"]["kb_plan"] and done["result"]["search_queries"]
    assert done["result"]["scores"]["answer_confidence"] == 0.9
    assert status["status"] == "succeeded" and status["progress"] == 100
    assert list(status["phases"]) == ["question", "knowledge", "answer"]
    assert status["phases"]["knowledge"]["iterations"][0]["kb_completeness_score"] == 0.9
    # the KB named in the request was searched
    assert '"documentName"' in live.script.calls["extract"][0]


async def test_a_failing_phase_is_an_error_event_and_the_earlier_phase_is_kept(
        research_server):
    live = await research_server(fail="update")
    async with live.client("alice") as client:
        session = (await client.post("/agent-workflow", json={"question": "tent wind?"})).json()
        events, code = await session_events(live, session)
        status = (await client.get(session["status_url"])).json()
    assert code == 1000                                   # not a dropped socket
    error = events[-1]
    assert error["type"] == "error" and error["status"] == "failed"
    assert error["phase"] == "knowledge"
    assert "the scripted update model is down" in error["error"]["message"]
    assert list(error["phases"]) == ["question"]
    assert status["status"] == "failed" and list(status["phases"]) == ["question"]


async def test_cancel_over_the_websocket_mid_knowledge_phase(research_server):
    async def slow_extract(role, n):
        if role == "extract":
            await asyncio.sleep(60)

    live = await research_server(hook=slow_extract)
    replies = []

    async def cancel_when_extracting(socket, event):
        if event.get("phase") == "knowledge" and event.get("step") == "extract" \
                and not replies:
            replies.append("sent")
            await socket.send(json.dumps({"type": "cancel"}))
        if event["type"] == "cancel_requested":
            replies.append(event)

    async with live.client("alice") as client:
        session = (await client.post("/agent-workflow", json={"question": "tent wind?"})).json()
        events, code = await asyncio.wait_for(
            session_events(live, session, on_event=cancel_when_extracting), 60)
        status = (await client.get(session["status_url"])).json()
    assert replies[0] == "sent" and replies[1]["type"] == "cancel_requested"
    last = events[-1]
    assert last["type"] == "status" and last["status"] == "cancelled"
    assert last["phase"] == "knowledge" and list(last["phases"]) == ["question"]
    assert code == 1000
    assert status["status"] == "cancelled" and list(status["phases"]) == ["question"]
    assert status["blocks"]["knowledge"]["status"] == "cancelled"
    assert status["blocks"]["question"]["status"] == "succeeded"
    assert "update" not in live.script.order


async def test_cancel_url_ends_the_session_cancelled_with_finished_phases_kept(
        research_server):
    reached = asyncio.Event()

    async def slow_extract(role, n):
        if role == "extract":
            reached.set()
            await asyncio.sleep(60)

    live = await research_server(hook=slow_extract)
    async with live.client("alice") as client:
        session = (await client.post("/agent-workflow", json={"question": "tent wind?"})).json()
        watching = asyncio.create_task(session_events(live, session))
        await asyncio.wait_for(reached.wait(), 30)
        cancelled = await client.post(session["cancel_url"])
        events, code = await asyncio.wait_for(watching, 30)
        status = (await client.get(session["status_url"])).json()
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert events[-1]["status"] == "cancelled" and code == 1000
    assert status["status"] == "cancelled"
    assert status["phases"]["question"]["question"].startswith("How should a tent")
    assert status["progress"] == 33


async def test_research_requests_are_checked(research_server):
    live = await research_server()
    async with live.client("alice") as client:
        empty = await client.post("/agent-workflow", json={"question": "   "})
        both = await client.post("/agent-workflow", json={"question": "q?",
                                                          "workflow_id": "chain"})
        stray = await client.post("/agent-workflow", json={"workflow_id": "chain",
                                                           "threshold": 0.5})
        high = await client.post("/agent-workflow", json={"question": "q?", "threshold": 2})
        inputs = await client.post("/agent-workflow", json={"question": "q?",
                                                            "inputs": {"x": 1}})
    assert empty.status_code == 422 and "the question is empty" in empty.text
    assert both.status_code == 422 and "exactly one" in both.text
    assert stray.status_code == 422 and "only for a research session" in stray.text
    assert high.status_code == 422 and "threshold" in high.text
    assert inputs.status_code == 422


async def test_a_session_may_ask_for_brief_or_full_research(research_server):
    """`brief` as `flowforge research --brief/--full`: what the request says, else
    what the server's model calls for (full on this scripted model)."""
    live = await research_server()
    async with live.client("alice") as client:
        chosen = {}
        for brief in (True, False, None):
            body = {"question": "tent wind?", **({} if brief is None else {"brief": brief})}
            started = await client.post("/agent-workflow", json=body)
            assert started.status_code == 202, started.text
            session = started.json()
            await session_events(live, session)
            chosen[brief] = (await client.get(session["status_url"])).json()["inputs"]["brief"]
        stray = await client.post("/agent-workflow", json={"workflow_id": "chain",
                                                           "brief": True})
    assert chosen == {True: True, False: False, None: False}
    assert stray.status_code == 422 and "brief: only for a research session" in stray.text
