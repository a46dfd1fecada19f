"""A stored workflow that runs another by id (issue 25): the child is looked
up among the saver's own workflows when the parent is saved, by
`/api/validate`, and again when a run starts, before any block of the
parent runs.  Another user's workflow is answered exactly as one that does
not exist."""

from __future__ import annotations

import httpx

INNER = {"id": "inner", "inputs": {"name": {"type": "string"}},
         "blocks": [{"id": "hello", "type": "set", "with": {"text": "hi {{input.name}}"}}]}
OUTER = {"id": "outer", "blocks": [
    {"id": "first", "type": "function", "with": {"function": "srv_sleep",
                                                  "args": {"value": 1}}},
    {"id": "call", "type": "workflow", "after": ["first"],
     "with": {"workflow": "inner", "inputs": {"name": "bob"}}}]}
MISSING = "no stored workflow 'inner': save it first (POST /api/workflows)"


async def _save(live, who: str, document: dict) -> httpx.Response:
    async with live.client(who) as client:
        return await client.post("/api/workflows", json=document)


async def _run(live, who: str, workflow_id: str) -> dict:
    async with live.client(who) as client:
        answer = await client.post(f"/api/workflows/{workflow_id}/runs?wait=true",
                                   json={"inputs": {}})
        assert answer.status_code == 200, answer.text
        return answer.json()


def _error(result: dict) -> str:
    """Why the run failed, as its `run_finished` event says."""
    return next(e for e in result["events"] if e["type"] == "run_finished")["error"]


def _details(answer: httpx.Response) -> list[dict]:
    assert answer.status_code == 422, answer.text
    return answer.json()["error"]["details"]


async def test_a_parent_naming_a_missing_child_is_refused_at_save_and_by_validate(server):
    details = _details(await _save(server, "alice", OUTER))
    assert [d["where"] for d in details] == ["blocks[1].with.workflow"]
    assert details[0]["message"].startswith(MISSING)
    async with server.client("alice") as client:
        checked = (await client.post("/api/validate", json=OUTER)).json()
        assert (await client.get("/api/workflows/outer")).status_code == 404   # not saved
    assert checked["valid"] is False and checked["graph"] is None
    assert [(p["where"], p["line"]) for p in checked["problems"]] == [
        ("blocks[1].with.workflow", 1)]
    assert checked["problems"][0]["message"].startswith(MISSING)

    assert (await _save(server, "alice", INNER)).status_code == 201
    assert (await _save(server, "alice", OUTER)).status_code == 201
    async with server.client("alice") as client:
        assert (await client.post("/api/validate", json=OUTER)).json()["valid"] is True
    result = await _run(server, "alice", "outer")
    assert result["status"] == "succeeded", result
    assert result["results"]["call"]["hello"] == {"text": "hi bob"}


async def test_another_users_child_is_answered_as_a_missing_one(server):
    nobody = _details(await _save(server, "bob", OUTER))
    assert (await _save(server, "alice", INNER)).status_code == 201
    alices = _details(await _save(server, "bob", OUTER))
    assert alices == nobody
    async with server.client("bob") as client:
        checked = (await client.post("/api/validate", json=OUTER)).json()
    assert [p["message"] for p in checked["problems"]] == [nobody[0]["message"]]


async def test_a_child_whose_inputs_do_not_match_is_refused_at_save(server):
    assert (await _save(server, "alice", INNER)).status_code == 201
    typo = {**OUTER, "blocks": [OUTER["blocks"][0], {
        **OUTER["blocks"][1], "with": {"workflow": "inner", "inputs": {"nmae": "bob"}}}]}
    details = _details(await _save(server, "alice", typo))
    assert ("blocks[1].with.inputs.nmae", "'inner' declares no input 'nmae' - did you mean "
                                          "'name'?; its inputs: name") in \
        [(d["where"], d["message"]) for d in details]


async def test_a_pinned_version_and_a_workflow_that_names_itself(server):
    assert (await _save(server, "alice", INNER)).status_code == 201
    pinned = {**OUTER, "blocks": [OUTER["blocks"][0], {
        **OUTER["blocks"][1], "with": {"workflow": "inner@2", "inputs": {"name": "bob"}}}]}
    details = _details(await _save(server, "alice", pinned))
    assert details[0]["where"] == "blocks[1].with.workflow"
    assert "no stored workflow 'inner@2'" in details[0]["message"]
    pinned["blocks"][1]["with"]["workflow"] = "inner@1"
    assert (await _save(server, "alice", pinned)).status_code == 201
    # A workflow may run itself (a loop bounded by a condition): it is what is being saved.
    again = {"id": "again", "inputs": {"n": {"type": "integer", "default": 0}}, "blocks": [
        {"id": "more", "type": "condition",
         "with": {"cases": [{"when": "input.n < 2", "goto": "deeper"}], "default": "stop"}},
        {"id": "deeper", "type": "workflow", "after": ["more"],
         "with": {"workflow": "again", "inputs": {"n": {"expr": "input.n + 1"}}}},
        {"id": "stop", "type": "set", "after": ["more"], "with": {"n": "{{input.n}}"}}]}
    assert (await _save(server, "alice", again)).status_code == 201, \
        (await _save(server, "alice", again)).text


async def test_a_child_changed_after_the_parent_was_saved_is_checked_before_any_block(server):
    assert (await _save(server, "alice", INNER)).status_code == 201
    assert (await _save(server, "alice", OUTER)).status_code == 201
    # The child now calls a hosted model the user holds no key for (the server
    # shares none): refused before the parent's first block, located in both.
    hosted = {**INNER, "blocks": [{"id": "ask", "type": "llm", "with": {
        "prompt": "hi {{input.name}}", "model": "openai/gpt-4o-mini"}}]}
    assert (await _save(server, "alice", hosted)).status_code == 201
    result = await _run(server, "alice", "outer")
    assert result["status"] == "failed" and result["blocks"] == {}, result
    assert _error(result).startswith("inner: blocks[0].with.model: the model "
                                      "'openai/gpt-4o-mini' is paid with a openai key"), \
        _error(result)
    assert "(used by 'outer' blocks[1] 'call')" in _error(result)

    # The child's input renamed: the parent's `inputs` no longer fit.
    renamed = {**INNER, "inputs": {"who": {"type": "string"}}, "blocks": [
        {"id": "hello", "type": "set", "with": {"text": "hi {{input.who}}"}}]}
    assert (await _save(server, "alice", renamed)).status_code == 201
    result = await _run(server, "alice", "outer")
    assert result["status"] == "failed" and result["blocks"] == {}, result
    assert _error(result).startswith("blocks[1].with.inputs.name: 'inner' declares no input "
                                      "'name'"), _error(result)

    # The child deleted: no block of the parent starts.
    async with server.client("alice") as client:
        assert (await client.delete("/api/workflows/inner")).status_code == 204
    result = await _run(server, "alice", "outer")
    assert result["status"] == "failed" and result["blocks"] == {}, result
    assert _error(result).startswith(f"blocks[1].with.workflow: {MISSING}"), _error(result)


async def test_a_child_that_lost_its_own_child_is_refused_located_in_both(server):
    grand = {"id": "grand", "blocks": [{"id": "g", "type": "set", "with": {"x": 1}}]}
    inner = {**INNER, "blocks": [{"id": "deeper", "type": "workflow",
                                  "with": {"workflow": "grand"}}]}
    assert (await _save(server, "alice", grand)).status_code == 201
    assert (await _save(server, "alice", inner)).status_code == 201
    async with server.client("alice") as client:
        assert (await client.delete("/api/workflows/grand")).status_code == 204
    details = _details(await _save(server, "alice", OUTER))
    assert [d["where"] for d in details] == ["inner: blocks[0].with.workflow"]
    assert details[0]["message"].startswith("no stored workflow 'grand'")
    assert details[0]["message"].endswith("(used by 'outer' blocks[1] 'call')")
    # An agent's workflow tool names a stored workflow too.
    tool = {"id": "tooly", "blocks": [{"id": "helper", "type": "agent", "with": {
        "prompt": "hi", "model": "local/smollm2",
        "tools": [{"workflow": "grand", "name": "g", "description": "G"}]}}]}
    details = _details(await _save(server, "alice", tool))
    assert [d["where"] for d in details] == ["blocks[0].with.tools[0].workflow"]
    assert details[0]["message"].startswith("no stored workflow 'grand'")
