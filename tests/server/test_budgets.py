"""Budgets through the server: a run's budget in the request, and the
server's per-user daily limit counting the user's earlier runs of the day."""

from __future__ import annotations

from flowforge.providers.scripted import register_script, unregister_script
from tests.server.conftest import start_server

WORKFLOW = {"id": "ask", "blocks": [{"id": "say", "type": "llm",
                                     "with": {"prompt": "say one two three four five",
                                              "max_tokens": 20}}]}


async def _run(client, **body) -> dict:
    response = await client.post("/api/workflows/ask/runs?wait=true", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_request_budget_and_daily_user_limit(tmp_path):
    register_script("budget_srv", lambda messages, tools: "one two three four five six")
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}",
                                    model="scripted/budget_srv", daily_user_tokens=27)
    try:
        async with live.client("alice") as alice, live.client("bob") as bob:
            for client in (alice, bob):
                assert (await client.post("/api/workflows", json=WORKFLOW)).status_code == 201
            tight = await _run(alice, budget={"tokens": 5})
            assert tight["status"] == "failed"
            assert "budget exceeded: the run's budget allows 5 tokens" in \
                tight["blocks"]["say"]["error"]
            first = await _run(alice)
            assert first["status"] == "succeeded"
            # 27 - a prompt of about 15 tokens: the answer is capped to 12 tokens.
            capped = [e for e in first["events"] if e["type"] == "budget_capped"]
            assert [(e["max_tokens"], e["capped_to"]) for e in capped] == [(20, 12)]
            second = await _run(alice)          # the first run's tokens count today
            assert second["status"] == "failed"
            error = second["blocks"]["say"]["error"]
            assert "the daily limit of user 'alice' allows 27 tokens" in error
            assert f"{first['usage']['tokens']['total']} tokens used so far" in error
            assert any(e["type"] == "budget_exceeded" for e in second["events"])
            assert (await _run(bob))["status"] == "succeeded"     # per user
            bad = await alice.post("/api/workflows/ask/runs", json={"budget": {"tokens": -1}})
            assert bad.status_code == 422 and "budget" in bad.text
    finally:
        await stop()
        unregister_script("budget_srv")
