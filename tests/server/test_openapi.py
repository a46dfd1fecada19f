"""The OpenAPI document: served without a key, complete, self-consistent."""

from __future__ import annotations

from typing import Any

EXPECTED = {
    "/health": {"get"},
    "/api/workflows": {"get", "post"},
    "/api/workflows/{workflow_id}": {"get", "put", "patch", "delete"},
    "/api/workflows/{workflow_id}/versions": {"get"},
    "/api/workflows/{workflow_id}/runs": {"post"},
    "/api/runs": {"get"},
    "/api/runs/{run_id}": {"get"},
    "/api/runs/{run_id}/events": {"get"},
    "/api/runs/{run_id}/cancel": {"post"},
    "/api/runs/{run_id}/approvals/{block_id}": {"post"},
    "/api/runs/{run_id}/deliveries": {"get"},
    "/api/runs/{run_id}/graph": {"get"},
    # the shipped apps' workflows, which chat and research runs name (routes/apps.py)
    "/api/apps": {"get"},
    "/api/apps/{app_id}": {"get"},
    "/api/executions": {"get"},
    "/api/executions/{execution_id}": {"get"},
    "/api/memory/{user_id}": {"get"},
    "/agent-workflow": {"post"},
    "/agent-workflow/{session_id}": {"get"},
    "/agent-workflow/{session_id}/cancel": {"post"},
    "/api/pipeline/run": {"post"},
    "/api/pipelines": {"get", "post"},
    "/api/pipelines/{pipeline_id}": {"get", "put", "delete"},
    "/api/pipelines/{pipeline_id}/run": {"post"},
    "/api/me": {"get"},
    "/api/users": {"get", "post"},
    # capability grants and per-user secrets (issue 16)
    "/api/capabilities": {"get"},
    "/api/users/{target}/grants": {"post"},
    "/api/users/{target}/grants/{capability}": {"delete"},
    "/api/secrets": {"get", "post"},
    "/api/secrets/{name}": {"delete"},
    # the builder (server/routes/builder.py, issue 6)
    "/api/blocks": {"get", "post"},
    "/api/blocks/{block_id}": {"get", "delete"},
    "/api/blocks/{block_id}/source": {"get"},
    "/api/blocks/search": {"post"},
    "/api/clarify": {"post"},
    "/api/create-agent": {"post"},
    "/api/create-agent/stream": {"get", "post"},
    "/api/automate": {"post"},
    # the RAG chat (issue 10)
    "/api/chat/query": {"post"},
    "/api/chat/query/stream": {"post"},
    "/api/chat/sessions": {"get"},
    "/api/chat/sessions/{session_id}": {"get", "delete"},
    # prompt-chain agent tasks (server/routes/agent.py, issue 11)
    "/api/agent": {"post"},
    "/api/agent/tasks/{task_id}": {"get"},
    # the web app's editor (server/routes/documents.py, issue 13)
    "/api/validate": {"post"},
    "/api/schema": {"get"},
    "/api/models": {"get"},
    "/api/block-outputs": {"get"},
    "/api/workflows/{workflow_id}/graph": {"get"},
    # what the editor's settings form and `{{` picker offer (issue 43)
    "/api/models": {"get"},
    "/api/block-outputs": {"get"},
    # test one block without running the workflow (server/routes/block_tests.py, issue 43)
    "/api/block-tests": {"post"},
    "/api/block-tests/reads": {"post"},
    # a workflow file of another system, converted without saving (issue 42)
    "/api/import": {"post"},
    # knowledge bases for the web app (server/routes/knowledge.py, issue 13)
    "/api/knowledge": {"get", "post"},
    "/api/knowledge/{name}": {"delete"},
    "/api/knowledge/{name}/documents": {"get", "post"},
    "/api/knowledge/{name}/documents/{document_id}": {"delete"},
    "/api/knowledge/{name}/search": {"post"},
}


def _refs(node: Any):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


async def test_the_document_lists_every_route_with_bearer_security(server):
    async with server.client(None) as client:
        document = (await client.get("/openapi.json")).json()
    assert document["openapi"].startswith("3.")
    paths = {path: set(ops) for path, ops in document["paths"].items()}
    assert paths == EXPECTED
    schemes = document["components"]["securitySchemes"]
    assert [s["scheme"] for s in schemes.values()] == ["bearer"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            secured = bool(operation.get("security"))
            assert secured == (path != "/health"), f"{method} {path}"


async def test_every_reference_resolves_and_workflow_bodies_name_the_format(server):
    async with server.client(None) as client:
        document = (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for ref in set(_refs(document)):
        assert ref.startswith("#/components/schemas/") and \
            ref.rsplit("/", 1)[1] in schemas, ref
    body = document["paths"]["/api/workflows"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"]["$ref"].endswith("/WorkflowDocument")
    assert "application/yaml" in body
    assert "blocks" in schemas["WorkflowDocument"]["properties"]


async def test_the_docs_pages_work_offline(server):
    """/docs and /redoc load their scripts, styles and favicon from this server
    and from nowhere else: offline they still render (issue 27)."""
    import re

    async with server.client(None) as client:
        for page in ("/docs", "/redoc"):
            answer = await client.get(page)
            assert answer.status_code == 200, page
            html = answer.text
            assert "://" not in html, page                 # no other host, no CDN
            urls = set(re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ["']([^"']+)["']""",
                                  html))
            urls = {u for pair in urls for u in pair if u}
            assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
            for url in urls:
                assert (await client.get(url)).status_code == 200, url
        assert '"validatorUrl": null' in (await client.get("/docs")).text


def test_apps_as_made_share_one_document_and_an_app_with_routes_of_its_own_gets_its_own():
    from flowforge.server.app import create_app

    first, second = create_app(), create_app()
    document = first.openapi()
    assert second.openapi() is document          # built once per process, not per app
    assert set(EXPECTED) <= set(document["paths"])

    extended = create_app()

    @extended.get("/mine")
    async def mine() -> dict:
        return {}

    own = extended.openapi()
    assert own is not document and "/mine" in own["paths"]
    assert "/mine" not in document["paths"] and "/mine" not in create_app().openapi()["paths"]
    assert set(own["paths"]) - {"/mine"} == set(document["paths"])
