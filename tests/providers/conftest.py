"""Fixtures for the provider tests: the embedded model served by llama-cpp-python's
own OpenAI-compatible server (once per session, on 127.0.0.1), fake HTTP through
`httpx2.MockTransport` (what the openai/anthropic/google SDKs use), and a switch
that lets a test send requests to a hosted API's address when its transport is fake."""

from __future__ import annotations

import json
from typing import Any, Callable

import httpx2
import pytest

from flowforge.providers import base
from flowforge.providers.registry import clear_provider_cache
from tests.script_modules import script


def _server_module():
    return script("local_llm_server")


@pytest.fixture(scope="session")
def llama_server():
    """llama-cpp-python's server running SmolLM2-135M on a free loopback port."""
    with _server_module().LocalLLMServer(threads=1, n_ctx=1024) as server:
        yield server


@pytest.fixture
def allow_model_requests(monkeypatch):
    """For tests whose HTTP is a MockTransport: the socket guard still applies."""
    monkeypatch.setattr(base, "ALLOW_MODEL_REQUESTS", True)


@pytest.fixture(autouse=True)
def _fresh_provider_cache():
    clear_provider_cache()
    yield
    clear_provider_cache()


class Recorder:
    """A MockTransport handler answering from a list of responses (or callables) in order,
    keeping every request it saw."""

    def __init__(self, *answers: httpx2.Response | Callable[[httpx2.Request], Any]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if not self.answers:
            raise AssertionError(f"unexpected extra request to {request.url}")
        answer = self.answers.pop(0)
        return answer(request) if callable(answer) else answer

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


def sse(*events: tuple[str | None, dict[str, Any]]) -> httpx2.Response:
    """A text/event-stream answer: each item is (event name or None, data)."""
    text = ""
    for name, data in events:
        if name:
            text += f"event: {name}\n"
        text += f"data: {json.dumps(data)}\n\n"
    return httpx2.Response(200, content=text.encode(),
                           headers={"content-type": "text/event-stream"})
