"""Testing one block without running the workflow (POST /api/block-tests and
/reads): the block runs alone on the user's run set-up (policy, secrets, the
server's model), with sample values or a past run's, nothing else runs and
nothing is stored; blocks that cannot run alone and missing values are 422s
naming each cause; the policy gate and run ownership hold as for a run."""

from __future__ import annotations

import json

import pytest

from flowforge.providers.scripted import register_script, unregister_script
from tests.server.conftest import start_server

#: classify -> answer (an agent reading an input, a variable and classify's output)
#: -> after (must never run when `answer` is tested)
DOCUMENT = """version: 1
id: desk
inputs: {query: {type: string}, lang: {type: string, default: en}}
variables: {company: Acme}
blocks:
  - id: classify
    type: set
    with: {content: "billing about {{input.query}}"}
  - id: answer
    name: Support Agent
    type: agent
    with:
      system: "You answer for {{vars.company}}."
      prompt: "Topic: {{classify.content}}. Question: {{input.query}}"
  - id: after
    type: function
    with: {function: srv_fail, args: {message: "{{answer.content}}"}}
  - id: review
    type: approval
    with: {message: "ok?"}
"""


def _echo(messages, tools):
    """The test model: answers with what the user message said, in capitals."""
    return "ECHO " + str(messages[-1].content).upper()


@pytest.fixture
async def echo_server(tmp_path, monkeypatch):
    """A server whose model (replacing every block's) is the deterministic echo."""
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    register_script("block_test_echo", _echo)
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}",
                                    model="scripted/block_test_echo")
    yield live
    await stop()
    unregister_script("block_test_echo")


async def test_an_agent_block_runs_alone_with_samples_and_shows_its_prompt(echo_server):
    async with echo_server.client("alice") as alice:
        answer = await alice.post("/api/block-tests", json={
            "document": DOCUMENT, "block_id": "answer",
            "samples": {"input": {"query": "refund?"},
                        "blocks": {"classify": {"content": "billing"}}}})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "succeeded" and body["error"] is None
        assert body["output"]["content"] == "ECHO TOPIC: BILLING. QUESTION: REFUND?"
        [request] = body["requests"]
        assert [(m["role"], m["content"]) for m in request["messages"]] == [
            ("system", "You answer for Acme."), ("user", "Topic: billing. Question: refund?")]
        assert body["tokens"]["total"] > 0 and body["duration_ms"] >= 0
        assert [e["type"] for e in body["events"]] == ["block_started"]
        # nothing else ran (`after` fails if it runs) and nothing was stored
        assert not [e for e in body["events"] if e.get("block_id") != "answer"]
        assert (await alice.get("/api/runs")).json()["runs"] == []


async def test_a_variable_sample_replaces_the_documents(echo_server):
    async with echo_server.client("alice") as alice:
        body = (await alice.post("/api/block-tests", json={
            "document": DOCUMENT, "block_id": "answer",
            "samples": {"input": {"query": "q"}, "vars": {"company": "Globex"},
                        "blocks": {"classify": {"content": "c"}}}})).json()
        assert body["requests"][0]["messages"][0]["content"] == "You answer for Globex."


async def test_a_past_run_fills_the_values_and_reads_lists_them(echo_server):
    async with echo_server.client("alice") as alice, echo_server.client("bob") as bob:
        saved = await alice.post("/api/workflows", content=DOCUMENT,
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
        run = await alice.post("/api/workflows/desk/runs?wait=true",
                               json={"inputs": {"query": "where is my parcel"}})
        run_id = run.json()["run_id"]

        reads = await alice.post("/api/block-tests/reads", json={
            "workflow_id": "desk", "block_id": "answer", "last_run": True})
        assert reads.status_code == 200, reads.text
        listed = reads.json()
        assert listed["run_id"] == run_id and listed["runnable"] is True
        assert {r["reference"]: r.get("value") for r in listed["reads"]} == {
            "vars.company": "Acme", "classify.content": "billing about where is my parcel",
            "input.query": "where is my parcel"}

        tested = await alice.post("/api/block-tests", json={
            "workflow_id": "desk", "block_id": "answer", "run_id": run_id,
            "samples": {"input": {"query": "changed"}}})         # a sample wins over the run
        assert tested.status_code == 200, tested.text
        sent = tested.json()["requests"][0]["messages"][-1]["content"]
        assert sent == "Topic: billing about where is my parcel. Question: changed"
        runs = (await alice.get("/api/runs")).json()["runs"]
        assert [r["run_id"] for r in runs] == [run_id]          # still the one run

        # another user's run is not theirs to read
        stolen = await bob.post("/api/block-tests", json={
            "document": DOCUMENT, "block_id": "answer", "run_id": run_id})
        assert stolen.status_code == 404, stolen.text
        assert (await bob.post("/api/block-tests", json={
            "workflow_id": "desk", "block_id": "answer"})).status_code == 404


async def test_missing_values_are_named_each(echo_server):
    async with echo_server.client("alice") as alice:
        answer = await alice.post("/api/block-tests", json={"document": DOCUMENT,
                                                            "block_id": "answer"})
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "missing_samples"
        assert {d["where"] for d in error["details"]} == {
            "samples.blocks.classify.content", "samples.input.query"}
        assert "{{classify.content}}" in json.dumps(error["details"])
        # a block's output given without the field read is still missing
        partial = await alice.post("/api/block-tests", json={
            "document": DOCUMENT, "block_id": "answer",
            "samples": {"input": {"query": "q"}, "blocks": {"classify": {"other": 1}}}})
        assert [d["where"] for d in partial.json()["error"]["details"]] == [
            "samples.blocks.classify.content"]


@pytest.mark.parametrize("block, kind", [
    ({"id": "gate", "type": "approval", "with": {"message": "ok?"}}, "approval"),
    ({"id": "gate", "type": "wait", "with": {"seconds": 5}}, "wait"),
    ({"id": "gate", "type": "workflow", "with": {"workflow": "other"}}, "workflow"),
    ({"id": "gate", "type": "loop", "with": {"times": 2},
      "blocks": [{"id": "inner", "type": "set", "with": {"i": "{{loop.index}}"}}]}, "loop"),
])
async def test_blocks_that_cannot_run_alone_say_why(server, block, kind):
    document = {"id": "alone", "blocks": [block]}
    async with server.client("alice") as alice:
        answer = await alice.post("/api/block-tests", json={
            "document": json.dumps(document), "block_id": "gate"})
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "block_cannot_run_alone"
        assert f"block 'gate' cannot run alone: a{'n' if kind[0] in 'aeiou' else ''} {kind}" \
            in error["message"]
        assert "run the workflow" in error["message"]
        reads = (await alice.post("/api/block-tests/reads", json={
            "document": json.dumps(document), "block_id": "gate"})).json()
        assert reads["runnable"] is False and "run the workflow" in reads["reason"]


async def test_a_block_inside_a_loop_runs_with_loop_samples(server):
    document = {"id": "loops", "inputs": {"word": {"type": "string"}}, "blocks": [
        {"id": "each", "type": "loop", "with": {"times": 2}, "blocks": [
            {"id": "inner", "type": "set",
             "with": {"text": "{{input.word}} #{{loop.index}}"}}]}]}
    async with server.client("alice") as alice:
        missing = await alice.post("/api/block-tests", json={
            "document": json.dumps(document), "block_id": "inner",
            "samples": {"input": {"word": "hi"}}})
        assert missing.status_code == 422
        assert [d["where"] for d in missing.json()["error"]["details"]] == ["samples.loop.index"]
        body = (await alice.post("/api/block-tests", json={
            "document": json.dumps(document), "block_id": "inner",
            "samples": {"input": {"word": "hi"}, "loop": {"index": 3}}})).json()
        assert body["status"] == "succeeded" and body["output"] == {"text": "hi #3"}


async def test_a_failing_block_answers_its_located_error(server):
    document = {"id": "fails", "blocks": [
        {"id": "boom", "type": "function", "with": {"function": "srv_fail",
                                                    "args": {"message": "{{input.why}}"}}}],
                "inputs": {"why": {"type": "string"}}}
    async with server.client("alice") as alice:
        body = (await alice.post("/api/block-tests", json={
            "document": json.dumps(document), "block_id": "boom",
            "samples": {"input": {"why": "no stock"}}})).json()
        assert body["status"] == "failed" and body["output"] is None
        assert "no stock" in body["error"]
        bad_input = await alice.post("/api/block-tests", json={
            "document": json.dumps(document), "block_id": "boom",
            "samples": {"input": {"why": 3}}})
        assert bad_input.status_code == 422 and "why" in bad_input.text


async def test_the_policy_gate_of_a_run_refuses_the_same_document(server):
    """A model that reads a server file needs `server_files`, as in a run."""
    document = {"id": "gated", "blocks": [
        {"id": "ask", "type": "agent", "with": {"prompt": "hi", "model": "scripted/rules.yaml"}}]}
    async with server.client("alice") as alice:
        answer = await alice.post("/api/block-tests", json={
            "document": json.dumps(document), "block_id": "ask"})
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "capability_denied"
        assert "server_files" in answer.text


async def test_bad_requests_are_located(server):
    async with server.client("alice") as alice:
        neither = await alice.post("/api/block-tests", json={"block_id": "x"})
        assert neither.status_code == 422 and "`document`" in neither.text
        unknown = await alice.post("/api/block-tests", json={
            "document": DOCUMENT, "block_id": "nope"})
        assert unknown.status_code == 422
        assert unknown.json()["error"]["code"] == "no_such_block"
        invalid = await alice.post("/api/block-tests", json={
            "document": "id: x\nblocks: [{id: a, type: set, with: {v: '{{ghost.x}}'}}]\n",
            "block_id": "a"})
        assert invalid.status_code == 422 and "ghost" in invalid.text


async def test_secrets_are_hidden_in_the_answer(echo_server):
    document = {"id": "keyed", "blocks": [
        {"id": "say", "type": "set", "with": {"text": "key={{secrets.TOKEN}}"}}]}
    async with echo_server.client("alice") as alice:
        assert (await alice.post("/api/secrets", json={
            "name": "TOKEN", "value": "s3cr3t-value"})).status_code == 201
        answer = await alice.post("/api/block-tests", json={
            "document": json.dumps(document), "block_id": "say"})
        assert "s3cr3t-value" not in answer.text
