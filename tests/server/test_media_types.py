"""A body of a type its route does not take answers 415 naming the type it
takes, on every route that takes a JSON body, as docs/guides/server.md promises: curl's
default form type included (issue 25)."""

from __future__ import annotations

import re

from flowforge.server.media_types import accepted_media_types


def _json_routes(openapi: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(method, re.sub(r"\{[^}]+\}", "x1", path), accepted)
            for (method, path), accepted in accepted_media_types(openapi).items()
            if "application/json" in accepted]


async def test_every_json_route_answers_a_form_body_with_415(server):
    routes = _json_routes(server.app.openapi())
    assert len(routes) >= 20 and ("POST", "/api/workflows/x1/runs", ("application/json",)) \
        in routes
    async with server.client() as client:
        for method, path, accepted in routes:
            response = await client.request(
                method, path, content=b"inputs=1",
                headers={"Content-Type": "application/x-www-form-urlencoded"})
            assert response.status_code == 415, (method, path, response.text)
            error = response.json()["error"]
            assert error["code"] == "unsupported_media_type"
            assert "'application/x-www-form-urlencoded'" in error["message"]
            assert " or ".join(accepted) in error["message"], error["message"]


async def test_json_and_the_declared_other_types_still_pass(server):
    async with server.client() as client:
        yaml_saved = await client.post(
            "/api/workflows", content=b"id: y\nblocks:\n  - {id: a, type: set, with: {v: 1}}\n",
            headers={"Content-Type": "application/yaml"})
        json_run = await client.post("/api/workflows/y/runs?wait=true",
                                     content=b'{"inputs": {}}',
                                     headers={"Content-Type": "application/json; charset=utf-8"})
        vendor_json = await client.post("/api/workflows/y/runs?wait=true", content=b"{}",
                                        headers={"Content-Type": "application/merge+json"})
        untyped = await client.post("/api/workflows/y/runs?wait=true", content=b"{}")
    assert yaml_saved.status_code == 201, yaml_saved.text
    assert json_run.status_code == 200 and json_run.json()["status"] == "succeeded"
    assert vendor_json.status_code == 200, vendor_json.text
    assert untyped.status_code == 200, untyped.text
