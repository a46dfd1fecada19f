"""Azure OpenAI's endpoint and API version as an LLM block's own fields (issue
26: the Sim-style executor writes `azureEndpoint`/`azureApiVersion` on the
block), sent to a real local server that answers as Azure does, and refused on
a server for a user without the `provider_endpoints` capability."""

from __future__ import annotations

import json

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import flowforge
from flowforge.errors import CapabilityDenied
from flowforge.providers.resolve import clear_provider_cache
from flowforge.workflow.policy import Policy
from tests.server.conftest import serve_asgi


def _azure_app(seen: list[dict]) -> Starlette:
    async def answer(request: Request) -> JSONResponse:
        seen.append({"path": request.url.path, "query": dict(request.query_params),
                     "body": json.loads(await request.body())})
        return JSONResponse({"id": "c", "object": "chat.completion", "created": 1,
                             "model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "hello from azure"}}],
                             "usage": {"prompt_tokens": 3, "completion_tokens": 3,
                                       "total_tokens": 6}})
    return Starlette(routes=[Route("/openai/deployments/{name}/chat/completions", answer,
                                   methods=["POST"])])


@pytest.mark.parametrize("names", [("azure_endpoint", "azure_api_version"),
                                   ("azureEndpoint", "azureApiVersion")], ids=["ours", "seed"])
async def test_a_blocks_azure_endpoint_and_version_are_used(monkeypatch, names):
    seen: list[dict] = []
    url, stop = await serve_asgi(_azure_app(seen))
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-test-key")
    for variable in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_VERSION", "OPENAI_API_VERSION"):
        monkeypatch.delenv(variable, raising=False)
    clear_provider_cache()
    endpoint, version = names
    doc = {"id": "az", "blocks": [{"id": "ask", "type": "llm", "with": {
        "prompt": "hi", "model": "openai-compatible/azure/my-deployment",
        endpoint: url, version: "2024-10-21"}}]}
    try:
        result = await flowforge.run(doc, storage=False)
    finally:
        await stop()
        clear_provider_cache()
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == "hello from azure"
    assert seen[0]["path"] == "/openai/deployments/my-deployment/chat/completions"
    assert seen[0]["query"]["api-version"] == "2024-10-21"


def test_a_server_user_needs_the_capability_to_choose_the_endpoint():
    doc = {"id": "az", "blocks": [{"id": "ask", "type": "agent", "with": {
        "prompt": "hi", "model": "openai-compatible/azure/d",
        "azureEndpoint": "https://attacker.example", "azureApiVersion": "2024-10-21"}}]}
    compiled = flowforge.load(doc)
    from flowforge.workflow.policy import check_policy
    with pytest.raises(CapabilityDenied, match="blocks\\[0\\].with.azure_endpoint"):
        check_policy(compiled, Policy((), subject="alice"))
