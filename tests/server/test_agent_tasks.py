"""`POST /api/agent` and `GET /api/agent/tasks/{id}`: a prompt-chain Agent task
is a run of the imported workflow; the frontend gets a signed webhook with the
task when it completes or fails; the API key stays out of everything stored or
sent; another user's task is 404."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from flowforge.apps.chains import agent_to_workflow
from flowforge.server.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from flowforge.tools.network import allowing_private_network
from tests.server.conftest import serve_asgi, start_server

CHAINS = Path(__file__).resolve().parents[2] / "examples" / "chains"
RULES = CHAINS.parent / "scripted" / "movie_script.rules.yaml"
KEY = "sk-frontend-user-key-4242"


def movie(with_return: bool = True) -> dict:
    agent = json.loads((CHAINS / "movie_script.json").read_text(encoding="utf-8"))
    if with_return:
        agent["promptChain"].append({"type": "return", "name": "Return",
                                     "output": ["summary", "listOfCharacters"]})
    return agent


class Frontend:
    """The app: receives event nodes' calls and the task webhooks."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.callbacks: list[tuple[str, dict, bytes]] = []
        self.event_status = 200

    def app(self) -> Starlette:
        async def result(request: Request) -> JSONResponse:
            self.events.append(await request.json())
            return JSONResponse({"stored": True}, status_code=self.event_status)

        async def callback(request: Request) -> JSONResponse:
            self.callbacks.append((str(request.url), dict(request.headers),
                                   await request.body()))
            return JSONResponse({"ok": True})

        return Starlette(routes=[Route("/prediction/movie-script/result", result,
                                       methods=["POST"]),
                                 Route("/callback/task", callback, methods=["POST"])])


@pytest.fixture
async def setup(tmp_path):
    frontend = Frontend()
    url, stop_frontend = await serve_asgi(frontend.app())
    live, stop = await start_server(
        f"sqlite:///{tmp_path / 'server.db'}", model=f"scripted/{RULES}",
        agent_webhook_url=f"{url}/callback/task?taskId={{task_id}}", chain_base_url=url)
    with allowing_private_network():            # event nodes call the frontend on loopback
        yield live, frontend
    await stop()
    await stop_frontend()


async def wait_task(client, task_id: str, *statuses: str) -> dict:
    for _ in range(500):
        task = (await client.get(f"/api/agent/tasks/{task_id}")).json()
        if task["status"] in statuses:
            return task
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task_id} is {task['status']}")


async def wait_callbacks(frontend: Frontend, count: int) -> None:
    for _ in range(500):
        if len(frontend.callbacks) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"expected {count} webhook(s), got {len(frontend.callbacks)}")


async def test_an_agent_task_runs_and_the_frontend_hears_of_it(setup):
    live, frontend = setup
    agent = movie()
    agent["variables"] = {"script": "Unit 7 meets Mia.", "apiKey": KEY}   # as the seed's POST
    async with live.client("alice") as alice:
        started = await alice.post("/api/agent", json=agent)
        assert started.status_code == 202, started.text
        task_id = started.json()["id"]
        assert started.json()["status_url"] == f"/api/agent/tasks/{task_id}"
        task = await wait_task(alice, task_id, "succeeded", "failed")
        secret = (await alice.get("/api/me")).json()["webhook_secret"]
        stored = (await alice.get(f"/api/runs/{task_id}/events",
                                  headers={"accept": "application/json"})).json()
    assert task["status"] == "succeeded", task
    assert task["output"] == {
        "summary": "A lonely robot and a stowaway girl bring a dead space station back to life.",
        "listOfCharacters": {"character": ["Unit 7", "Mia"]}}
    assert task["logs"].index("plots: running") < task["logs"].index("plots: succeeded")
    assert task["logs"][-5:] == ["send result: running", "send result: succeeded",
                                 "Return: running", "Return: succeeded", "task: succeeded"]
    assert frontend.events == [{"characters": {"character": ["Unit 7", "Mia"]},
                                "summary": task["output"]["summary"]}]
    await wait_callbacks(frontend, 1)
    url, headers, body = frontend.callbacks[0]
    assert url.endswith(f"/callback/task?taskId={task_id}")
    assert verify(secret, headers[TIMESTAMP_HEADER.lower()], body,
                  headers[SIGNATURE_HEADER.lower()])
    payload = json.loads(body)
    assert payload["event"] == "task_finished"
    assert {k: payload[k] for k in ("id", "status", "logs", "output")} == \
        {k: task[k] for k in ("id", "status", "logs", "output")}
    row = await live.storage.get_run(task_id)
    everything = json.dumps([row, stored, payload, task], default=str)
    assert KEY not in everything and "apiKey" not in row["inputs"]


async def test_a_failing_event_fails_the_task_and_still_calls_back(setup):
    live, frontend = setup
    frontend.event_status = 500
    async with live.client("alice") as alice:
        started = await alice.post("/api/agent", json={"agent": movie(), "variables": {
            "script": "Unit 7 meets Mia."}})
        task = await wait_task(alice, started.json()["id"], "succeeded", "failed")
    assert task["status"] == "failed"
    failed = [line for line in task["logs"] if line.startswith("send result: failed")]
    assert len(failed) == 1 and "answered HTTP 500" in failed[0]
    assert "Return: skipped" in task["logs"]
    await wait_callbacks(frontend, 1)
    assert json.loads(frontend.callbacks[0][2])["status"] == "failed"


async def test_a_stored_workflow_by_id_and_another_users_task(setup):
    live, _ = setup
    native = agent_to_workflow(movie(), base_url=live.app.state.settings.chain_base_url)
    native["id"] = "movie-script"
    async with live.client("alice") as alice, live.client("bob") as bob:
        assert (await alice.post("/api/workflows", json=native)).status_code == 201
        started = await alice.post("/api/agent", json={
            "workflow_id": "movie-script", "variables": {"script": "Mia.", "apiKey": KEY}})
        assert started.status_code == 202, started.text
        task_id = started.json()["id"]
        assert (await bob.get(f"/api/agent/tasks/{task_id}")).status_code == 404
        assert (await bob.post("/api/agent", json={"workflow_id": "movie-script"})
                ).status_code == 404
        task = await wait_task(alice, task_id, "succeeded", "failed")
        # an Agent saved as it is becomes the workflow it imports to
        saved = await alice.put("/api/workflows/movie-agent", json=movie())
        assert saved.status_code == 201, saved.text
        assert [b["type"] for b in saved.json()["document"]["blocks"]] == [
            "llm", "llm", "llm", "parser", "http", "response"]
        again = await alice.post("/api/agent", json={
            "workflow_id": "movie-agent", "variables": {"script": "Mia.", "apiKey": KEY}})
        second = await wait_task(alice, again.json()["id"], "succeeded", "failed")
    assert task["status"] == "succeeded" and task["output"]["summary"].startswith("A lonely")
    assert second["status"] == "succeeded" and second["output"] == task["output"]


async def test_bad_requests_name_the_problem(setup):
    live, _ = setup
    agent = movie()
    agent["promptChain"][1]["user"] = "Plot {plotz}"
    async with live.client("alice") as alice:
        bad = await alice.post("/api/agent", json=agent)
        assert bad.status_code == 422
        [detail] = bad.json()["error"]["details"]
        assert detail["where"] == "promptChain[1] 'summary'"
        assert detail["message"].startswith("unknown variable {plotz} in `user`")
        neither = await alice.post("/api/agent", json={"variables": {}})
        assert neither.status_code == 422 and "workflow_id" in neither.text
        unknown = await alice.post("/api/agent", json={"agent": movie(),
                                                       "variables": {"scrpit": "x"}})
        assert unknown.status_code == 422 and "scrpit" in unknown.text
        assert (await alice.get("/api/agent/tasks/nope")).status_code == 404


async def test_many_tasks_run_at_once_each_with_its_own_callback(setup):
    live, frontend = setup
    async with live.client("alice") as alice:
        started = await asyncio.gather(*(
            alice.post("/api/agent", json={"agent": movie(), "variables": {
                "script": f"Script number {n}."}}) for n in range(4)))
        ids = [response.json()["id"] for response in started]
        tasks = await asyncio.gather(*(wait_task(alice, task_id, "succeeded", "failed")
                                       for task_id in ids))
    assert [task["status"] for task in tasks] == ["succeeded"] * 4
    await wait_callbacks(frontend, 4)
    called = sorted(url.rsplit("taskId=", 1)[1] for url, _, _ in frontend.callbacks)
    assert called == sorted(ids)
    sent = sorted(json.dumps(event) for event in frontend.events)
    assert len(sent) == 4


async def test_a_private_frontend_url_the_server_may_not_call_is_named(tmp_path):
    live, stop = await start_server(
        f"sqlite:///{tmp_path / 'server.db'}", model=f"scripted/{RULES}",
        allow_private_webhooks=False, chain_base_url="http://127.0.0.1:1",
        agent_webhook_url="http://127.0.0.1:1/callback/task?taskId={task_id}")
    try:
        async with live.client("alice") as alice:
            refused = await alice.post("/api/agent", json={"agent": movie()})
    finally:
        await stop()
    assert refused.status_code == 422
    assert "the server's agent webhook (--agent-webhook-url" in refused.text
    assert "--allow-private-webhooks" in refused.text


async def test_a_key_written_in_the_posted_agent_is_used_and_never_stored(setup):
    """The seed allows a node's `apiKey` as text (issue 26): an Agent posted to
    run is run with it as a run secret; saving it, which would store the key,
    is refused with the way out."""
    live, _ = setup
    agent = movie()
    agent["variables"] = {"script": "Unit 7 meets Mia."}
    literal = "sk-ant-written-in-the-node-4321"
    for node in agent["promptChain"]:
        if "apiKey" in node:
            node["apiKey"] = literal
    async with live.client("alice") as alice:
        started = await alice.post("/api/agent", json=agent)
        assert started.status_code == 202, started.text
        task = await wait_task(alice, started.json()["id"], "succeeded", "failed")
        assert task["status"] == "succeeded", task
        stored = (await alice.get(f"/api/runs/{task['id']}/events",
                                  headers={"accept": "application/json"})).json()
        saved = await alice.post("/api/workflows", json=agent)
    row = await live.storage.get_run(task["id"])
    assert literal not in json.dumps([row, stored, task], default=str)
    assert saved.status_code == 422
    assert "would be stored with it" in saved.text
