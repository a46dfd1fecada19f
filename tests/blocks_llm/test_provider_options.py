"""`defaults.provider_options` reaches the provider as LLMRequest.extra, so an
Ollama/vLLM base URL can live in the workflow instead of the environment."""

from __future__ import annotations

import flowforge
from flowforge.providers.base import LLMResponse, Provider
from flowforge.providers.resolve import register_provider

SEEN: list[dict] = []


class _Recording(Provider):
    name = "recording"

    async def complete(self, request, on_delta=None):
        SEEN.append(dict(request.extra))
        return LLMResponse(text="ok", model=request.model)


register_provider("recording", lambda name, options: (_Recording(), name))


async def test_defaults_provider_options_become_request_extra():
    doc = {"id": "po", "defaults": {"model": "recording/m",
                                    "provider_options": {"base_url": "http://127.0.0.1:9/v1"}},
           "blocks": [{"id": "a", "type": "agent", "with": {"prompt": "hi"}}]}
    result = await flowforge.run(doc, {}, storage=False)
    assert result.status == "succeeded", result.error
    assert SEEN[-1]["base_url"] == "http://127.0.0.1:9/v1"
