"""A shared server trusts nobody's document (issue 16): each attack an ordinary
user tried through the public API is replayed here and refused with a 403
naming the capability, and nothing reaches the host: no process starts, no
file is read, no environment value or server key leaves, no private address
is called.  The same documents work for a user an administrator granted the
capability."""

from __future__ import annotations

import json
import sys

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.echo_server import echo_server, sending
from tests.server.conftest import serve_asgi, start_server

SERVER_SECRET = "srv-secret-0123456789abcdef"


class Receiver:
    """An OpenAI-compatible endpoint (and plain HTTP target) on loopback that
    records every request it gets."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

        async def completions(request: Request) -> JSONResponse:
            self.requests.append({"path": request.url.path,
                                  "authorization": request.headers.get("authorization"),
                                  "body": (await request.body()).decode()})
            return JSONResponse({
                "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "hello"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})

        async def anything(request: Request) -> JSONResponse:
            self.requests.append({"path": request.url.path,
                                  "authorization": request.headers.get("authorization")})
            return JSONResponse({"ok": True})

        self.app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                                     Route("/{rest:path}", anything, methods=["GET", "POST"])])


@pytest.fixture
async def receiver():
    target = Receiver()
    url, stop = await serve_asgi(target.app)
    target.url = url
    yield target
    await stop()


@pytest.fixture
async def server(tmp_path, monkeypatch):
    monkeypatch.setenv("FF_CAP_SERVER_SECRET", SERVER_SECRET)
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    yield live
    await stop()


async def _grant(live, who: str, capability: str) -> None:
    async with live.client("admin") as admin:
        answer = await admin.post(f"/api/users/{who}/grants", json={"capability": capability})
        assert answer.status_code == 201, answer.text


async def _save(live, who: str, document: dict) -> httpx.Response:
    async with live.client(who) as client:
        return await client.post("/api/workflows", json=document)


async def _run(live, who: str, workflow_id: str) -> dict:
    async with live.client(who) as client:
        answer = await client.post(f"/api/workflows/{workflow_id}/runs?wait=true",
                                   json={"inputs": {}})
        assert answer.status_code in (200, 201, 202), answer.text
        return answer.json()


def _refused(answer: httpx.Response, capability: str, where: str) -> None:
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "capability_denied"
    assert capability in error["message"]
    detail = next(d for d in error["details"] if d["capability"] == capability)
    assert detail["where"].startswith(where)
    assert f"flowforge users grant alice {capability}" in detail["message"]


def _mcp_command_workflow(marker) -> dict:
    script = f"open({str(marker)!r}, 'w').write('started')"
    return {"id": "mcp-local", "blocks": [
        {"id": "agent", "type": "agent", "with": {
            "prompt": "what time is it?", "model": "openai-compatible/nowhere/m",
            "tools": [{"mcp": {"command": sys.executable, "args": ["-c", script]}}]}}]}


async def test_a_stdio_mcp_server_is_a_command_and_needs_local_commands(server, tmp_path):
    marker = tmp_path / "started-by-mcp"
    answer = await _save(server, "alice", _mcp_command_workflow(marker))
    _refused(answer, "local_commands", "blocks[0].with.tools[0].mcp.command")
    async with server.client("alice") as client:      # inline documents are checked too
        inline = await client.post("/agent-workflow", json={
            "workflow": _mcp_command_workflow(marker), "inputs": {}})
    assert inline.status_code == 403
    assert not marker.exists()

    await _grant(server, "alice", "local_commands")
    assert (await _save(server, "alice", _mcp_command_workflow(marker))).status_code == 201
    await _run(server, "alice", "mcp-local")
    assert marker.read_text() == "started"        # granted: the command did start


async def test_a_grant_revoked_after_saving_still_stops_the_run(server, tmp_path):
    marker = tmp_path / "started-by-mcp"
    await _grant(server, "alice", "local_commands")
    assert (await _save(server, "alice", _mcp_command_workflow(marker))).status_code == 201
    async with server.client("admin") as admin:
        assert (await admin.delete("/api/users/alice/grants/local_commands")).status_code == 204
    async with server.client("alice") as client:
        answer = await client.post("/api/workflows/mcp-local/runs?wait=true", json={})
    _refused(answer, "local_commands", "blocks[0].with.tools[0].mcp.command")
    assert not marker.exists()


async def test_server_files_nested_workflow_paths_and_knowledge_sources(server, tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    (private / "passwords.txt").write_text("root password: hunter2-very-secret")
    (private / "inner.yaml").write_text(
        "id: inner\nblocks:\n  - {id: leak, type: set, with: {text: hunter2-from-file}}\n")
    nested = {"id": "reads-file", "blocks": [
        {"id": "inner", "type": "workflow", "with": {"workflow": str(private / "inner.yaml")}}]}
    sources = {"id": "reads-folder", "blocks": [
        {"id": "search", "type": "knowledge",
         "with": {"knowledge_base": "stolen", "query": "password", "sources": [str(private)]}}]}
    _refused(await _save(server, "alice", nested), "server_files", "blocks[0].with.workflow")
    _refused(await _save(server, "alice", sources), "server_files", "blocks[0].with.sources")

    # Nested workflows on a server are the user's stored workflows, by id.
    inner = {"id": "inner", "blocks": [{"id": "hello", "type": "set", "with": {"x": 1}}]}
    outer = {"id": "outer", "blocks": [
        {"id": "call", "type": "workflow", "with": {"workflow": "inner"}}]}
    assert (await _save(server, "alice", inner)).status_code == 201
    assert (await _save(server, "alice", outer)).status_code == 201
    result = await _run(server, "alice", "outer")
    assert result["status"] == "succeeded", result
    assert result["results"]["call"]["hello"] == {"x": 1}
    # ... and never another user's: to bob, alice's `inner` does not exist.
    answer = await _save(server, "bob", outer)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"][0]["where"] == "blocks[0].with.workflow"
    assert "no stored workflow 'inner'" in answer.json()["error"]["details"][0]["message"]

    await _grant(server, "alice", "server_files")
    assert (await _save(server, "alice", nested)).status_code == 201
    result = await _run(server, "alice", "reads-file")
    assert result["status"] == "succeeded"
    assert result["results"]["inner"]["leak"]["text"] == "hunter2-from-file"


async def test_the_servers_environment_is_not_readable_without_server_env(server):
    document = {"id": "reads-env", "blocks": [
        {"id": "leak", "type": "set", "with": {"value": "{{env.FF_CAP_SERVER_SECRET}}"}}]}
    _refused(await _save(server, "alice", document), "server_env", "blocks[0].with")
    # A document's own env: stays readable: it is the document's, not the server's.
    own = {"id": "own-env", "env": {"GREETING": "hi"}, "blocks": [
        {"id": "show", "type": "set", "with": {"value": "{{env.GREETING}}"}}]}
    assert (await _save(server, "alice", own)).status_code == 201
    assert (await _run(server, "alice", "own-env"))["results"]["show"]["value"] == "hi"


async def test_a_document_cannot_send_a_server_key_to_its_own_url(server, receiver, monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_MINE_API_KEY", SERVER_SECRET)
    document = {"id": "exfiltrate", "defaults": {"provider_options": {
        "base_url": f"{receiver.url}/v1", "api_key_env": "FF_CAP_SERVER_SECRET"}},
        "blocks": [{"id": "ask", "type": "agent",
                    "with": {"prompt": "hi", "model": "openai-compatible/mine/m",
                             "stream": False}}]}
    answer = await _save(server, "alice", document)
    _refused(answer, "provider_endpoints", "defaults.provider_options")
    assert {d["where"] for d in answer.json()["error"]["details"]} >= {
        "defaults.provider_options.base_url", "defaults.provider_options.api_key_env"}
    assert receiver.requests == []

    # Granted provider_endpoints, with the administrator sharing server keys:
    # the document may pick its URL, but no server variable and no shared key
    # travels there.
    await _grant(server, "alice", "provider_endpoints")
    server.app.state.settings.share_provider_keys = True
    assert (await _save(server, "alice", document)).status_code == 201
    result = await _run(server, "alice", "exfiltrate")
    assert "no API key found" in result["blocks"]["ask"]["error"]
    assert receiver.requests == []
    document["defaults"]["provider_options"].pop("api_key_env")
    assert (await _save(server, "alice", document)).status_code == 201
    result = await _run(server, "alice", "exfiltrate")
    assert result["status"] == "succeeded", result["blocks"]
    assert len(receiver.requests) == 1
    assert SERVER_SECRET not in json.dumps(receiver.requests)


async def test_allow_private_network_in_a_document_needs_private_network(server, receiver):
    document = {"id": "intranet", "blocks": [
        {"id": "call", "type": "http", "with": {"url": f"{receiver.url}/internal",
                                                "allow_private_network": True}}]}
    _refused(await _save(server, "alice", document), "private_network",
             "blocks[0].with.allow_private_network")
    no_flag = {"id": "intranet2", "blocks": [
        {"id": "call", "type": "http", "with": {"url": f"{receiver.url}/internal"}}]}
    assert (await _save(server, "alice", no_flag)).status_code == 201
    result = await _run(server, "alice", "intranet2")      # the SSRF guard holds
    assert result["status"] == "failed" and receiver.requests == []

    await _grant(server, "alice", "private_network")
    assert (await _save(server, "alice", document)).status_code == 201
    assert (await _run(server, "alice", "intranet"))["status"] == "succeeded"
    assert [r["path"] for r in receiver.requests] == ["/internal"]


async def test_role_grants_and_admins(server, tmp_path):
    marker = tmp_path / "started-by-mcp"
    async with server.client("admin") as admin:
        assert (await admin.post("/api/workflows", json=_mcp_command_workflow(marker))
                ).status_code == 201                 # admins hold every capability
        answer = await admin.post("/api/users/role:user/grants",
                                  json={"capability": "local_commands"})
        assert answer.status_code == 201
        listed = (await admin.get("/api/capabilities")).json()
        assert {"subject": "role:user", "capability": "local_commands"}.items() <= \
            listed["grants"][0].items()
        bad = await admin.post("/api/users/alice/grants", json={"capability": "local_comands"})
        assert bad.status_code == 422 and "did you mean 'local_commands'" in bad.text
    async with server.client("bob") as bob:
        assert "local_commands" in (await bob.get("/api/me")).json()["capabilities"]
        assert (await bob.get("/api/capabilities")).status_code == 403
        assert (await bob.post("/api/users/bob/grants",
                               json={"capability": "server_env"})).status_code == 403
    assert (await _save(server, "bob", _mcp_command_workflow(marker))).status_code == 201


async def test_user_secrets_are_encrypted_private_and_redacted(server, tmp_path):
    value = "sk-alice-0123456789-top-secret"
    async with server.client("alice") as alice:
        stored = await alice.post("/api/secrets", json={"name": "TEAM_KEY", "value": value})
        assert stored.status_code == 201 and value not in stored.text
        listed = await alice.get("/api/secrets")
        assert [s["name"] for s in listed.json()["secrets"]] == ["TEAM_KEY"]
        assert value not in listed.text
        bad = await alice.post("/api/secrets", json={"name": "has space", "value": "x"})
        assert bad.status_code == 422
    for name in ("alice", "bob"):           # the echo server is on loopback
        await server.storage.add_grant(f"user:{server.users[name]['user_id']}",
                                       "private_network")
    with echo_server() as url:
        document = {"id": "uses-secret", "blocks": [      # a secret goes only into a credential
            sending("header", url, "Bearer {{secrets.TEAM_KEY}}"),
            {"id": "done", "type": "response", "with": {"message": "{{header.data.auth}}"}}]}
        assert (await _save(server, "alice", document)).status_code == 201
        async with server.client("alice") as alice:
            answer = await alice.post("/api/workflows/uses-secret/runs?wait=true", json={})
            run_id = answer.json()["run_id"]
            texts = [answer.text, (await alice.get(f"/api/runs/{run_id}")).text,
                     (await alice.get(f"/api/runs/{run_id}/events",
                                      headers={"Accept": "application/json"})).text]
        assert answer.json()["status"] == "succeeded"
        assert "Bearer ***" in answer.text
        for text in texts:
            assert value not in text
        raw = b"".join(path.read_bytes() for path in tmp_path.glob("server.db*"))
        assert raw and value.encode() not in raw             # encrypted at rest

        # Bob's run of the same document does not see alice's secret.
        assert (await _save(server, "bob", document)).status_code == 201
        bob_result = await _run(server, "bob", "uses-secret")
        assert value not in json.dumps(bob_result)
        async with server.client("bob") as bob:
            assert (await bob.delete("/api/secrets/TEAM_KEY")).status_code == 404
        async with server.client("alice") as alice:
            assert (await alice.delete("/api/secrets/TEAM_KEY")).status_code == 204
            assert (await alice.get("/api/secrets")).json()["secrets"] == []


async def test_a_users_secret_is_their_provider_key(server, receiver, monkeypatch):
    # The administrator configures where the provider is; each user brings a key.
    monkeypatch.setenv("OPENAI_COMPATIBLE_TEAMBOX_BASE_URL", f"{receiver.url}/v1")
    async with server.client("alice") as alice:
        await alice.post("/api/secrets", json={"name": "OPENAI_COMPATIBLE_TEAMBOX_API_KEY",
                                               "value": "sk-alice-own-key"})
    document = {"id": "ask", "blocks": [
        {"id": "ask", "type": "agent", "with": {"prompt": "hi", "stream": False,
                                                "model": "openai-compatible/teambox/m"}}]}
    assert (await _save(server, "alice", document)).status_code == 201
    result = await _run(server, "alice", "ask")
    assert result["status"] == "succeeded", result
    assert receiver.requests[-1]["authorization"] == "Bearer sk-alice-own-key"
    assert "sk-alice-own-key" not in json.dumps(result)


async def test_the_support_demo_uploaded_to_a_server(tmp_path, monkeypatch):
    """examples/support.yaml builds its knowledge base from `sources: [policies]`:
    on a server that is a server-files capability, and the relative source
    resolves against the server's files root (issue 15)."""
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{tmp_path / 'kb.db'}")
    live, stop = await start_server(
        f"sqlite:///{tmp_path / 'server.db'}", files_root=str(tmp_path),
        model=f"scripted/{examples / 'scripted' / 'support.rules.yaml'}")
    text = (examples / "support.yaml").read_text()
    headers = {"Content-Type": "application/yaml"}
    try:
        async with live.client("alice") as alice:
            refused = await alice.post("/api/workflows", content=text, headers=headers)
            _refused(refused, "server_files", "blocks[1].with.sources")
            await _grant(live, "alice", "server_files")
            saved = await alice.post("/api/workflows", content=text, headers=headers)
            assert saved.status_code == 201, saved.text
            assert "blocks[1].with.sources[0]" in saved.json()["warnings"][0]
            assert "--files-root" in saved.json()["warnings"][0]
            live.app.state.settings.files_root = str(examples)
            again = await alice.put("/api/workflows/support", content=text, headers=headers)
            assert again.status_code == 200 and "warnings" not in again.json()
            ran = await alice.post("/api/workflows/support/runs?wait=true", json={})
        result = ran.json()
        assert result["status"] == "succeeded", result["blocks"]
        assert result["results"]["search"]["totalResults"] > 0
    finally:
        await stop()
