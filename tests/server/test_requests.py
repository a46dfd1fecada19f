"""Saving workflows (JSON or YAML, every save a version) and the clear 4xx JSON
answers to malformed bodies, unknown ids and oversized payloads."""

from __future__ import annotations

import json

import pytest

from tests.server.conftest import chain

YAML_DOC = """\
id: hello
name: Hello
blocks:
  - id: greet
    type: set
    with: {text: "hello {{input.name}}"}
inputs:
  name: {type: string}
"""


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] and error["message"]
    return error


async def test_yaml_and_json_documents_save_as_versions(server):
    async with server.client() as client:
        created = await client.post("/api/workflows", content=YAML_DOC,
                                    headers={"Content-Type": "application/yaml"})
        again = await client.post("/api/workflows", json={
            "id": "hello", "name": "Hello 2", "inputs": {"name": {"type": "string"}},
            "blocks": [{"id": "greet", "type": "set", "with": {"text": "hi {{input.name}}"}}]})
        versions = (await client.get("/api/workflows/hello/versions")).json()["versions"]
        first = (await client.get("/api/workflows/hello?version=1")).json()
        listed = (await client.get("/api/workflows")).json()["workflows"]
        result = (await client.post("/api/workflows/hello/runs?wait=true",
                                    json={"inputs": {"name": "Ann"}})).json()
    assert created.status_code == 201 and created.json()["version"] == 1
    assert again.json()["version"] == 2 and again.json()["name"] == "Hello 2"
    assert [v["version"] for v in versions] == [1, 2]
    assert first["document"]["blocks"][0]["with"]["text"] == "hello {{input.name}}"
    assert [(w["id"], w["version"]) for w in listed] == [("hello", 2)]
    assert result["outputs"] == {"greet": {"text": "hi Ann"}}


async def test_put_creates_then_versions_and_checks_the_id(server):
    async with server.client() as client:
        created = await client.put("/api/workflows/chain", json=chain())
        without_id = {k: v for k, v in chain().items() if k != "id"}
        updated = await client.put("/api/workflows/chain", json=without_id)
        mismatch = await client.put("/api/workflows/other", json=chain())
    assert created.status_code == 201 and updated.status_code == 200
    assert updated.json()["version"] == 2
    error = _error(mismatch, 422)
    assert "'chain'" in error["message"] and "'other'" in error["message"]


async def test_delete_hides_the_workflow_but_keeps_its_runs(server):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=1, seconds=0))
        run = (await client.post("/api/workflows/chain/runs?wait=true", json={})).json()
        deleted = await client.delete("/api/workflows/chain")
        gone = await client.get("/api/workflows/chain")
        versions = await client.get("/api/workflows/chain/versions")
        twice = await client.delete("/api/workflows/chain")
        kept = await client.get(f"/api/runs/{run['run_id']}")
    assert deleted.status_code == 204
    _error(gone, 404)
    _error(versions, 404)
    _error(twice, 404)
    assert kept.status_code == 200


async def test_an_invalid_document_lists_every_located_problem(server):
    document = {"id": "broken", "blocks": [
        {"id": "a", "type": "set", "with": {"x": "{{nowhere.value}}"}},
        {"id": "b", "type": "no_such_type"}]}
    async with server.client() as client:
        response = await client.post("/api/workflows", json=document)
        listed = (await client.get("/api/workflows")).json()["workflows"]
    error = _error(response, 422)
    assert error["code"] == "invalid_workflow" and len(error["details"]) >= 2
    text = json.dumps(error["details"])
    assert "nowhere" in text and "no_such_type" in text
    assert all(d["where"].startswith("blocks[") for d in error["details"])
    assert listed == []


@pytest.mark.parametrize("body, headers, status, code", [
    (b'{"id": "x", "blocks": [', {"Content-Type": "application/json"}, 400, "malformed_json"),
    (b"id: [unclosed", {"Content-Type": "application/yaml"}, 400, "malformed_yaml"),
    (b"", {"Content-Type": "application/json"}, 400, "bad_request"),
    (b"<xml/>", {"Content-Type": "application/xml"}, 415, "unsupported_media_type"),
    (b'["a", "list"]', {"Content-Type": "application/json"}, 422, "invalid_workflow"),
    (b"\xff\xfe", {"Content-Type": "application/json"}, 400, "bad_request"),
])
async def test_malformed_workflow_bodies_get_clear_errors(server, body, headers, status, code):
    async with server.client() as client:
        response = await client.post("/api/workflows", content=body, headers=headers)
    assert _error(response, status)["code"] == code


async def test_malformed_run_bodies_get_clear_errors(server):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=1, seconds=0))
        broken = await client.post("/api/workflows/chain/runs", content=b"{nope",
                                   headers={"Content-Type": "application/json"})
        wrong_type = await client.post("/api/workflows/chain/runs", json={"inputs": [1, 2]})
        bad_hook = await client.post("/api/workflows/chain/runs",
                                     json={"webhook": "ftp://example.com/x"})
        bad_version = await client.post("/api/workflows/chain/runs", json={"version": 0})
    assert _error(broken, 400)["code"] == "malformed_json"
    assert _error(wrong_type, 422)["details"][0]["where"] == "body.inputs"
    assert _error(bad_hook, 422)["details"][0]["where"] == "body.webhook"
    assert _error(bad_version, 422)["details"][0]["where"] == "body.version"


async def test_unknown_ids_and_routes_get_404_json(server):
    async with server.client() as client:
        workflow = await client.get("/api/workflows/nope")
        run = await client.post("/api/workflows/nope/runs", json={})
        route = await client.get("/api/nothing-here")
        execution = await client.get("/api/executions/nope")
    assert "nope" in _error(workflow, 404)["message"]
    assert "nope" in _error(run, 404)["message"]
    assert "/api/nothing-here" in _error(route, 404)["message"]
    _error(execution, 404)


async def test_oversized_bodies_get_413_whether_declared_or_streamed(server):
    limit = server.app.state.settings.max_body_bytes
    big = {"id": "big", "description": "x" * (limit + 10), "blocks": []}

    async def chunks():
        payload = json.dumps(big).encode()
        for start in range(0, len(payload), 4096):
            yield payload[start:start + 4096]

    async with server.client() as client:
        declared = await client.post("/api/workflows", json=big)
        streamed = await client.post("/api/workflows", content=chunks(),
                                     headers={"Content-Type": "application/json"})
        just_fits = await client.post("/api/workflows", json={**big, "description": "ok"})
    assert str(limit) in _error(declared, 413)["message"]
    _error(streamed, 413)
    assert just_fits.status_code == 201
