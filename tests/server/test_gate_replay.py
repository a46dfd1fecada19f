"""Issue 23's findings, replayed as an ordinary user (alice, no grants)
against the real server app: every model name, knowledge-base id and
workflow reference passes the one policy gate, the server's provider keys are
never spent unless it shares them, and another user's block is exactly like a
block that does not exist."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.server.conftest import start_server
from tests.server.test_capabilities import Receiver, _grant, _refused, receiver  # noqa: F401
from tests.server.conftest import serve_asgi  # noqa: F401

SERVER_KEY = "sk-server-own-0123456789"


@pytest.fixture
async def server(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.delenv("OPENAI_COMPATIBLE_OLLAMA_BASE_URL", raising=False)
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    yield live
    await stop()


@pytest.fixture
def server_files(tmp_path):
    """Files of the server a user must not read: rules YAML with telling keys,
    a SQLite database, and a path that does not exist."""
    rules = tmp_path / "private.yaml"
    rules.write_text("database_password: hunter2\nadmin_token: t0k3n\n")
    database = tmp_path / "private.db"
    sqlite3.connect(database).execute("CREATE TABLE t (x)").connection.close()
    return {"rules": rules, "database": database, "missing": tmp_path / "nothing-here.gguf"}


def _denied(answer, capability: str) -> None:
    _refused(answer, capability, "model")
    for leaked in ("database_password", "admin_token", "hunter2", "No such file"):
        assert leaked not in answer.text


@pytest.mark.parametrize("route, body", [
    ("/api/clarify", {"conversation": [{"role": "user", "content": "sum numbers"}]}),
    ("/api/create-agent", {"intent": "sum numbers"}),
    ("/api/create-agent/stream", {"intent": "sum numbers"}),
    ("/api/automate", {"intent": "sum numbers", "input": {}}),
])
async def test_builder_models_naming_server_files_are_refused(server, server_files, route, body):
    async with server.client("alice") as alice:
        answers = {name: await alice.post(route, json={**body, "model": model})
                   for name, model in [
                       ("rules", f"scripted/{server_files['rules']}"),
                       ("passwd", "scripted//etc/passwd"),
                       ("sqlite", f"scripted/{server_files['database']}"),
                       ("local", f"local/{server_files['rules']}"),
                       ("missing", f"local/{server_files['missing']}")]}
    for answer in answers.values():
        _denied(answer, "server_files")
    # an existing file and a missing one answer alike
    assert answers["local"].json()["error"]["message"] == \
        answers["missing"].json()["error"]["message"]


async def test_loopback_presets_need_private_network(server, receiver):
    async with server.client("alice") as alice:
        for preset in ("ollama", "vllm", "llamacpp", "lmstudio"):
            answer = await alice.post("/api/clarify", json={
                "intent": "sum numbers", "model": f"openai-compatible/{preset}/m"})
            _denied(answer, "private_network")
        saved = await alice.post("/api/workflows", json={"id": "loop", "blocks": [
            {"id": "a", "type": "llm", "with": {"prompt": "hi",
                                                 "model": "openai-compatible/ollama/m"}}]})
        _refused(saved, "private_network", "blocks[0].with.model")


async def test_a_budget_downgrade_is_a_model_name_too(server, server_files):
    document = {"id": "thrifty", "budget": {"tokens": 5, "on_exceed": {
        "downgrade": f"scripted/{server_files['rules']}"}},
        "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]}
    async with server.client("alice") as alice:
        _refused(await alice.post("/api/workflows", json=document), "server_files",
                 "budget.on_exceed.downgrade")
        del document["budget"]
        assert (await alice.post("/api/workflows", json=document)).status_code == 201
        answer = await alice.post("/api/workflows/thrifty/runs?wait=true", json={
            "budget": {"tokens": 5, "on_exceed": {"downgrade": "scripted//etc/passwd"}}})
        _refused(answer, "server_files", "budget.on_exceed.downgrade")


async def test_the_servers_keys_are_not_spent_unless_shared(server, receiver, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", f"{receiver.url}/v1")
    monkeypatch.setenv("FLOWFORGE_EMBEDDINGS_BASE_URL", f"{receiver.url}/v1")
    async with server.client("alice") as alice:
        for route, body in [("/api/clarify", {"intent": "sum numbers"}),
                            ("/api/create-agent", {"intent": "sum numbers"})]:
            answer = await alice.post(route, json={**body, "model": "openai/gpt-4o"})
            assert answer.status_code == 403, answer.text
            assert "--share-provider-keys" in answer.text and "OPENAI_API_KEY" in answer.text
        router = {"id": "route-me", "blocks": [
            {"id": "pick", "type": "router", "with": {
                "strategy": "semantic", "prompt": "pick one", "input": "hello",
                "embedding_model": "openai/text-embedding-3-small"}},
            {"id": "a", "type": "response", "after": ["pick"], "with": {"message": "A"}},
            {"id": "b", "type": "response", "after": ["pick"], "with": {"message": "B"}}]}
        assert (await alice.post("/api/workflows", json=router)).status_code == 201
        run = (await alice.post("/api/workflows/route-me/runs?wait=true", json={})).json()
        assert run["status"] == "failed" and run["blocks"] == {}     # refused before any block
        error = run["events"][-1]["error"]
        assert "--share-provider-keys" in error and "blocks[0].with.embedding_model" in error
        chat = {"id": "ask", "blocks": [{"id": "a", "type": "llm", "with": {
            "prompt": "hi", "model": "openai/gpt-4o"}}]}
        assert (await alice.post("/api/workflows", json=chat)).status_code == 201
        asked = (await alice.post("/api/workflows/ask/runs?wait=true", json={})).json()
        assert asked["status"] == "failed"
        assert asked["blocks"] == {}           # refused before the first block runs
        finished = asked["events"][-1]
        assert finished["type"] == "run_finished" and "--share-provider-keys" in finished["error"]
        assert "blocks[0].with.model" in finished["error"]
        assert receiver.requests == []
        # with a key of her own, the build's calls carry hers, never the server's
        assert (await alice.post("/api/secrets", json={"name": "OPENAI_API_KEY",
                                                       "value": "sk-alice"})).status_code \
            in (200, 201)
        await alice.post("/api/clarify", json={"intent": "sum numbers",
                                               "model": "openai/gpt-4o"})
    assert receiver.requests, "the clarifier called no model"
    assert {r["authorization"] for r in receiver.requests} == {"Bearer sk-alice"}


async def test_a_knowledge_base_id_is_never_a_server_folder(server, tmp_path, monkeypatch):
    (tmp_path / "server-notes.md").write_text("The vault code is 4242.")
    (tmp_path / "shared" / "notes").mkdir(parents=True)
    (tmp_path / "shared" / "notes" / "vault.md").write_text("The vault code is 4242.")
    monkeypatch.chdir(tmp_path)
    async with server.client("alice") as alice:
        for kb_id in (".", "..", "shared/.."):
            answer = await alice.post("/api/chat/query", json={"query": "vault code?",
                                                               "kb_id": kb_id})
            _refused(answer, "server_files", "kb_id")
        # `shared/NAME` names the shared base; a folder of that name is never read
        named = await alice.post("/api/chat/query", json={"query": "vault code?",
                                                          "kb_id": "shared/notes"})
        assert named.status_code == 404 and "4242" not in named.text, named.text
        made = await alice.post("/api/knowledge", json={"name": ".."})
        _refused(made, "server_files", "name")
        bases = (await alice.get("/api/knowledge")).json()["knowledge_bases"]
    assert bases == []


async def _bob_block(server) -> None:
    async with server.client("bob") as bob:
        added = await bob.post("/api/blocks", json={
            "id": "bob_block", "name": "Bob's block", "description": "Bob's private tool",
            "execution_type": "python",
            "input_schema": {"type": "object", "required": ["bob_secret_field"],
                             "properties": {"bob_secret_field": {
                                 "type": "string", "description": "bob's private input"}}},
            "source_code": "async def execute(inputs, context):\n    return {'ok': True}\n"})
        assert added.status_code == 201, added.text


async def test_another_users_block_is_like_one_that_does_not_exist(server):
    await _bob_block(server)
    bob_id = server.users["bob"]["user_id"]
    hidden = ("bob_secret_field", "bob's private input", bob_id, "Bob's")

    def nothing_of_bob(answer) -> None:
        for text in hidden:
            assert text not in answer.text, answer.text

    document = {"id": "uses-bob", "blocks": [{"id": "x", "type": "registry",
                                              "uses": "bob_block", "with": {}}]}
    async with server.client("alice") as alice:
        checked = await alice.post("/api/validate", content=json.dumps(document),
                                   headers={"Content-Type": "application/json"})
        nothing_of_bob(checked)
        assert "no block 'bob_block'" in checked.text
        typo = {**document, "blocks": [{**document["blocks"][0], "uses": "bob_blok"}]}
        misspelt = await alice.post("/api/validate", content=json.dumps(typo),
                                    headers={"Content-Type": "application/json"})
        assert "did you mean 'bob_block'" not in misspelt.text
        run = await alice.post("/api/pipeline/run", json={
            "id": "p", "nodes": [{"id": "n1", "block_id": "bob_block", "inputs": {}}],
            "edges": [], "input": {}})
        nothing_of_bob(run)
        assert run.status_code == 422
        for answer in [await alice.get("/api/blocks/bob_block"),
                       await alice.get("/api/blocks/bob_block/source")]:
            assert answer.status_code == 404
            nothing_of_bob(answer)
        listed = await alice.get("/api/blocks")
        nothing_of_bob(listed)
        claimed = await alice.post("/api/blocks", json={
            "id": "bob_block", "name": "Mine", "description": "Alice's",
            "execution_type": "python",
            "source_code": "async def execute(inputs, context):\n    return {}\n"})
        assert claimed.status_code != 403
        nothing_of_bob(claimed)
    async with server.client("bob") as bob:         # and bob's block is still bob's alone
        mine = (await bob.get("/api/blocks/bob_block")).json()["block"]
        assert mine["description"] == "Bob's private tool" and mine["version"] == 1


async def test_a_server_that_shares_its_keys_pays_for_its_users(tmp_path, monkeypatch, receiver):
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{receiver.url}/v1")
    live, stop = await start_server(f"sqlite:///{tmp_path / 'shared.db'}",
                                    share_provider_keys=True)
    try:
        async with live.client("alice") as alice:
            await alice.post("/api/clarify", json={"intent": "sum numbers",
                                                   "model": "openai/gpt-4o"})
            document = {"id": "ask", "blocks": [{"id": "a", "type": "llm", "with": {
                "prompt": "hi", "model": "openai/gpt-4o"}}]}
            assert (await alice.post("/api/workflows", json=document)).status_code == 201
            run = (await alice.post("/api/workflows/ask/runs?wait=true", json={})).json()
    finally:
        await stop()
    assert run["status"] == "succeeded", run["blocks"]
    assert {r["authorization"] for r in receiver.requests} == {f"Bearer {SERVER_KEY}"}
    assert len(receiver.requests) >= 2          # the clarifier's call and the run's
