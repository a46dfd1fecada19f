"""The chat over HTTP: /api/chat/query, its SSE variant, and sessions kept
per user (another user's session is not found)."""

from __future__ import annotations

import json

import pytest
from httpx_sse import EventSource

from tests.apps.helpers import call
from tests.server.conftest import start_server

ANSWER = dict(answer="Two years; Summit gear is lifetime.", sources=["Warranty"],
              confidence_score=0.9, used_internal_kb=True, used_external_kb=False)


@pytest.fixture
async def chat_server(tmp_path, knowledge, knowledge_path, plan, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{knowledge_path}")
    steps = []
    model, script = plan(*[lambda messages: steps.pop(0)(messages)] * 50)
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}", model=model)
    live.steps = steps
    live.script = script
    yield live
    await stop()


def play(live, *answers):
    live.steps.extend((lambda messages, a=a: a) for a in answers)


async def test_query_answers_and_keeps_the_session_per_user(chat_server):
    live = chat_server
    play(live, call("knowledge_base_search", query="warranty", kb_id="policies"),
         call("generate_response", **ANSWER))
    async with live.client("alice") as alice, live.client("bob") as bob:
        response = await alice.post("/api/chat/query",
                                    json={"query": "How long is the warranty?",
                                          "kb_id": "policies"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"answer", "sources", "confidence_score", "used_internal_kb",
                             "used_external_kb", "session_id", "run_id", "formatted_response"}
        assert body["formatted_response"].endswith("Sources:\n[KB] Warranty")
        assert body["answer"] == ANSWER["answer"]
        assert body["sources"][0]["kind"] == "kb" and body["sources"][0]["title"] == "Warranty"
        session_id = body["session_id"]
        run = (await alice.get(f"/api/runs/{body['run_id']}")).json()
        assert run["status"] == "succeeded"

        listed = (await alice.get("/api/chat/sessions")).json()["sessions"]
        assert [s["session_id"] for s in listed] == [session_id]
        shown = (await alice.get(f"/api/chat/sessions/{session_id}")).json()
        assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]

        assert (await bob.get(f"/api/chat/sessions/{session_id}")).status_code == 404
        assert (await bob.delete(f"/api/chat/sessions/{session_id}")).status_code == 404
        assert (await bob.get("/api/chat/sessions")).json()["sessions"] == []
        assert (await bob.get(f"/api/runs/{body['run_id']}")).status_code == 404
        assert (await alice.delete(f"/api/chat/sessions/{session_id}")).status_code == 204
        assert (await alice.get(f"/api/chat/sessions/{session_id}")).status_code == 404


async def test_a_chat_that_cannot_answer_is_a_424_naming_the_run(chat_server):
    live = chat_server
    play(live, {"reply": "Two years."}, {"reply": "Two years!"})
    async with live.client("alice") as alice:
        response = await alice.post("/api/chat/query", json={"query": "Warranty?",
                                                              "kb_id": "policies"})
    assert response.status_code == 424       # Failed Dependency: the model did not comply
    error = response.json()["error"]
    assert "without calling the required tool 'knowledge_base_search'" in error["message"]
    assert error["details"][0]["run_id"]


async def test_bad_requests_are_refused_with_the_field(chat_server):
    async with chat_server.client("alice") as alice:
        for body, field in (({"query": ""}, "query"),
                            ({"query": "hi", "kb_id": "../etc"}, "kb_id"),
                            ({"query": "hi", "session_id": "a b"}, "session_id"),
                            ({"query": "hi", "extra": 1}, "extra")):
            response = await alice.post("/api/chat/query", json=body)
            assert response.status_code == 422, body
            assert field in response.text
    async with chat_server.client(None) as anonymous:
        assert (await anonymous.post("/api/chat/query", json={"query": "hi"})).status_code == 401


async def test_streaming_sends_tool_calls_then_the_answer(chat_server):
    live = chat_server
    play(live, call("knowledge_base_search", query="warranty", kb_id="policies"),
         call("generate_response", **ANSWER))
    events = []
    async with live.client("alice") as alice:
        async with alice.stream("POST", "/api/chat/query/stream",
                                json={"query": "Warranty?", "kb_id": "policies"}) as response:
            assert response.status_code == 200
            async for sse in EventSource(response).aiter_sse():
                if not sse.data:
                    continue                  # a ping (httpx-sse passes them on, empty)
                events.append((sse.event, json.loads(sse.data)))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "run_started" and kinds[-1] == "answer"
    tools = [data["name"] for kind, data in events if kind == "tool_called"]
    assert tools == ["knowledge_base_search", "generate_response"]
    assert kinds.index("run_finished") < kinds.index("answer")
    assert events[-1][1]["answer"] == ANSWER["answer"]


async def test_kb_id_may_name_the_shared_base_explicitly(chat_server):
    live = chat_server
    play(live, call("knowledge_base_search", query="warranty"), call("generate_response", **ANSWER))
    async with live.client("alice") as alice:
        response = await alice.post("/api/chat/query", json={
            "query": "How long is the warranty?", "kb_id": "shared/policies"})
        assert response.status_code == 200, response.text
        assert response.json()["sources"][0]["title"] == "Warranty"
        for bad in ("shared/../x", "bob/private", "shared/a/b"):
            refused = await alice.post("/api/chat/query", json={"query": "q", "kb_id": bad})
            assert refused.status_code == 422, (bad, refused.text)


async def test_a_follow_up_keeps_the_sessions_knowledge_base(chat_server):
    live = chat_server
    play(live, call("knowledge_base_search", query="warranty", kb_id="policies"),
         call("generate_response", **ANSWER),
         call("knowledge_base_search", query="summit warranty", kb_id="policies"),
         call("generate_response", **ANSWER))
    async with live.client("alice") as alice:
        first = await alice.post("/api/chat/query", json={"query": "How long is the warranty?",
                                                          "kb_id": "policies"})
        assert first.status_code == 200, first.text
        session_id = first.json()["session_id"]
        # no kb_id: the session's base, not the server's default (which does not exist here)
        follow = await alice.post("/api/chat/query", json={"query": "And for Summit gear?",
                                                           "session_id": session_id})
        assert follow.status_code == 200, follow.text
        run = (await alice.get(f"/api/runs/{follow.json()['run_id']}")).json()
        shown = (await alice.get(f"/api/chat/sessions/{session_id}")).json()
        # a new conversation without a base still meets the default, and says so
        fresh = await alice.post("/api/chat/query", json={"query": "Warranty?"})
    assert run["inputs"]["kb"] == "policies"
    assert [m.get("kb") for m in shown["messages"] if m["role"] == "user"] == \
        ["policies", "policies"]
    assert fresh.status_code == 404 and "default_kb" in fresh.json()["error"]["message"]


async def test_a_chat_runs_graph_is_the_shipped_workflow(chat_server):
    live = chat_server
    play(live, call("knowledge_base_search", query="warranty", kb_id="policies"),
         call("generate_response", **ANSWER))
    async with live.client("alice") as alice, live.client("bob") as bob:
        answer = (await alice.post("/api/chat/query", json={"query": "Warranty?",
                                                            "kb_id": "policies"})).json()
        graph = await alice.get(f"/api/runs/{answer['run_id']}/graph")
        stored = await alice.get("/api/workflows/rag-chat/graph")
        app = await alice.get("/api/apps/rag-chat")
        apps = (await alice.get("/api/apps")).json()["apps"]
        unknown = await alice.get("/api/apps/nope")
        hidden = await bob.get(f"/api/runs/{answer['run_id']}/graph")
    assert stored.status_code == 404                 # no user stored it: why this route exists
    assert graph.status_code == 200, graph.text
    assert graph.json()["app"] == "rag-chat" and graph.json()["id"] == "rag-chat"
    assert {"related", "answer"} <= {node["id"] for node in graph.json()["nodes"]}
    assert app.json()["source"].startswith("# The RAG chat")
    assert app.json()["graph"]["nodes"] == graph.json()["nodes"]
    assert {"rag-chat", "research", "research-question"} <= {a["id"] for a in apps}
    assert unknown.status_code == 404 and "rag-chat" in unknown.json()["error"]["message"]
    assert hidden.status_code == 404


async def test_a_missing_knowledge_base_is_the_same_404_on_both_routes(chat_server):
    """The streaming route refuses a base that does not exist before its stream
    starts, with the plain route's status and message (it said `internal_error`)."""
    async with chat_server.client("alice") as alice:
        plain = await alice.post("/api/chat/query", json={"query": "Warranty?",
                                                          "kb_id": "nosuchbase"})
        async with alice.stream("POST", "/api/chat/query/stream",
                                json={"query": "Warranty?", "kb_id": "nosuchbase"}) as streamed:
            await streamed.aread()
        assert plain.status_code == streamed.status_code == 404, streamed.text
        assert streamed.json() == plain.json()
        assert plain.json()["error"]["code"] == "not_found"
        assert "no knowledge base named 'nosuchbase'" in plain.json()["error"]["message"]
        # no kb_id and no default base on this server: the same, on both
        plain = await alice.post("/api/chat/query", json={"query": "Warranty?"})
        streamed = await alice.post("/api/chat/query/stream", json={"query": "Warranty?"})
        assert plain.status_code == streamed.status_code == 404
    assert chat_server.script.seen == []            # no model was asked
