"""A model server that misbehaves (issue 17): garbage, truncated JSON, an HTML
page with 200, an empty body, no choices, 500s, 429 with Retry-After, a server
that accepts and never answers. Each is a retryable ProviderError saying what
came back, streaming or not, never an empty "success" or a raw JSONDecodeError;
a hang is given up on after the per-attempt timeout; and at 30 % injected
faults, retries and a fallback model answer 50 runs out of 50."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import flowforge
from flowforge.errors import ProviderError
from flowforge.providers import call as call_module
from flowforge.providers.base import LLMRequest, Message
from flowforge.providers.call import call_model
from flowforge.providers.registry import ProviderOptions, clear_provider_cache
from flowforge.providers.retry import RetryPolicy
from tests.server.conftest import serve_asgi

FAULTS = ["500", "429", "hang", "garbage", "truncated", "html", "empty", "nochoices"]


def _completion(text: str = "fine") -> dict:
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}}


def _chunks(text: str = "fine") -> str:
    parts = [{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
              "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                           "finish_reason": None}]},
             {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
              "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    return "".join(f"data: {json.dumps(p)}\n\n" for p in parts) + "data: [DONE]\n\n"


class FaultServer:
    """Answers each request with the next mode: a fixed one, or a fault drawn
    with probability `rate` from a seeded generator."""

    def __init__(self, mode: str = "ok", rate: float = 0.0, seed: int = 0) -> None:
        self.mode, self.rate, self.random = mode, rate, random.Random(seed)
        self.seen: list[str] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.answer,
                                           methods=["POST"])])

    def next_mode(self) -> str:
        if self.rate:
            return self.random.choice(FAULTS) if self.random.random() < self.rate else "ok"
        return self.mode

    async def answer(self, request: Request) -> Response:
        stream = (await request.json()).get("stream", False)
        mode = self.next_mode()
        self.seen.append(mode)
        if mode == "ok":
            if stream:
                return StreamingResponse(iter([_chunks()]), media_type="text/event-stream")
            return JSONResponse(_completion())
        if mode == "500":
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        if mode == "429":
            return JSONResponse({"error": {"message": "slow down"}}, status_code=429,
                                headers={"Retry-After": "0.01"})
        if mode == "hang":
            await asyncio.sleep(30)
        if mode == "garbage":
            return Response("this is not json at all", media_type="application/json"
                            if not stream else "text/event-stream")
        if mode == "truncated":
            body = '{"id": "c", "choices": [{"index": 0, "mess' if not stream else \
                'data: {"id": "c", "choices": [{"index": 0, "del\n\n'
            return Response(body, media_type="application/json" if not stream
                            else "text/event-stream")
        if mode == "html":
            return Response("<html><body>Gateway says hi</body></html>", media_type="text/html")
        if mode == "empty":
            return Response("", media_type="application/json" if not stream
                            else "text/event-stream")
        if mode == "nochoices":
            if stream:
                body = 'data: {"id": "c", "object": "chat.completion.chunk", "created": 1, ' \
                       '"model": "m", "choices": []}\n\ndata: [DONE]\n\n'
                return Response(body, media_type="text/event-stream")
            return JSONResponse({**_completion(), "choices": []})
        raise AssertionError(mode)


@pytest.fixture
def quick(monkeypatch):
    """Tiny waits: retries, Retry-After and the per-attempt timeouts."""
    monkeypatch.setattr(call_module, "DEFAULT_RETRY",
                        RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02))
    monkeypatch.setenv("FLOWFORGE_MODEL_TIMEOUT", "0.5")
    monkeypatch.setenv("FLOWFORGE_STREAM_IDLE_TIMEOUT", "0.5")
    clear_provider_cache()
    yield
    clear_provider_cache()


async def _serve(server: FaultServer, name: str, monkeypatch) -> None:
    url, stop = await serve_asgi(server.app)
    monkeypatch.setenv(f"OPENAI_COMPATIBLE_{name.upper()}_BASE_URL", f"{url}/v1")
    return stop


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("mode, says", [
    ("garbage", "unusable"), ("truncated", "unusable"), ("html", "unusable"),
    ("empty", "unusable"), ("nochoices", "unusable"), ("500", "HTTP 500"),
    ("429", "HTTP 429"), ("hang", "0.5 s"),
])
async def test_each_fault_is_a_retryable_provider_error(quick, monkeypatch, mode, says, stream):
    server = FaultServer(mode)
    stop = await _serve(server, "faulty", monkeypatch)
    request = LLMRequest(model="m", messages=[Message("user", "hi")], stream=stream)
    import os
    try:
        with pytest.raises(ProviderError) as caught:
            await call_model("openai-compatible/faulty/m", request,
                             options=ProviderOptions(env=dict(os.environ)),
                             retry=RetryPolicy(attempts=1))
    finally:
        await stop()
    assert caught.value.retryable, str(caught.value)
    assert says in str(caught.value)
    assert "could not connect" not in str(caught.value)


async def test_a_hang_is_given_up_on_within_the_timeout(quick, monkeypatch):
    stop = await _serve(FaultServer("hang"), "faulty", monkeypatch)
    request = LLMRequest(model="m", messages=[Message("user", "hi")])
    import os
    import time
    started = time.monotonic()
    try:
        with pytest.raises(ProviderError, match="no answer within 0.5 s"):
            await call_model("openai-compatible/faulty/m", request,
                             options=ProviderOptions(env=dict(os.environ)),
                             retry=RetryPolicy(attempts=2, base_delay=0.01))
    finally:
        await stop()
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_fifty_runs_at_thirty_percent_faults_all_succeed(quick, monkeypatch, stream):
    primary, backup = FaultServer(rate=0.3, seed=11), FaultServer(rate=0.3, seed=12)
    stops = [await _serve(primary, "primary", monkeypatch),
             await _serve(backup, "backup", monkeypatch)]
    document = {"id": "ask", "blocks": [{"id": "ask", "type": "llm", "with": {
        "prompt": "hello", "model": "openai-compatible/primary/m", "stream": stream,
        "fallback": ["openai-compatible/backup/m"]}}]}
    try:
        results = [await flowforge.run(document, storage=False) for _ in range(50)]
    finally:
        for stop in stops:
            await stop()
    failed = [r.error for r in results if r.status != "succeeded"]
    assert failed == []
    faults = [mode for mode in primary.seen + backup.seen if mode != "ok"]
    assert len(faults) >= 10 and len(set(faults)) >= 5       # the faults did happen
