"""A model server that misbehaves (issue 17): garbage, truncated JSON, an HTML
page with 200, an empty body, no choices, 500s, 429 with Retry-After, a server
that accepts and never answers, a connection cut in the middle of the answer
(issue 24). Each is a retryable ProviderError saying what came back, streaming
or not, never an empty "success" or a raw JSONDecodeError; a hang is given up
on after the per-attempt timeout; a stream cut after text was shown is retried
and the consumer told the answer restarts; and at 30 % injected faults, retries
and a fallback model answer 100 runs out of 100, streamed or not."""

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
from flowforge.providers.resolve import ProviderOptions, clear_provider_cache
from flowforge.providers.retry import RetryPolicy
from tests.server.conftest import serve_asgi

FAULTS = ["500", "429", "hang", "garbage", "truncated", "html", "empty", "nochoices", "cut"]


def _completion(text: str = "fine") -> dict:
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}}


def _chunk(text: str) -> str:
    return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1,
                                  "model": "m", "choices": [{"index": 0, "finish_reason": None,
                                                             "delta": {"content": text}}]}) + "\n\n"


async def _cut_after_first_chunk():
    """A stream that sends part of the answer, then dies: the server's side of
    the connection goes away without ending the chunked body."""
    yield _chunk("the answer is ")
    await asyncio.sleep(0.01)
    raise ConnectionResetError("the model server went away mid-answer")


async def _cut_body(body: str):
    yield body[: len(body) // 2]
    await asyncio.sleep(0.01)
    raise ConnectionResetError("the model server went away mid-answer")


async def _keep_alive_forever():
    """A server that keeps the stream open with SSE comments and never sends a token."""
    while True:
        yield ": keep-alive\n\n"
        await asyncio.sleep(0.05)


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
        if mode == "hang":      # until the client gives up and closes the connection
            while (await request.receive())["type"] != "http.disconnect":
                pass            # (a server stopped meanwhile would wait 2 s for it)
            return Response(status_code=499)
        if mode == "cut":
            if stream:
                return StreamingResponse(_cut_after_first_chunk(),
                                         media_type="text/event-stream")
            body = json.dumps(_completion())
            return StreamingResponse(_cut_body(body), media_type="application/json")
        if mode == "keepalive":
            return StreamingResponse(_keep_alive_forever(), media_type="text/event-stream")
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
    ("429", "HTTP 429"), ("hang", "0.5 s"), ("cut", "closed in the middle of the answer"),
])
async def test_each_fault_is_a_retryable_provider_error(quick, monkeypatch, mode, says, stream):
    if mode != "hang":      # only the hang is about the timeout: on a loaded machine a
        for name in ("FLOWFORGE_MODEL_TIMEOUT", "FLOWFORGE_STREAM_IDLE_TIMEOUT"):
            monkeypatch.setenv(name, "10")       # first answer may take over 0.5 s
        clear_provider_cache()
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
async def test_a_hundred_runs_at_thirty_percent_faults_all_succeed(quick, monkeypatch, stream):
    primary, backup = FaultServer(rate=0.3, seed=11), FaultServer(rate=0.3, seed=12)
    stops = [await _serve(primary, "primary", monkeypatch),
             await _serve(backup, "backup", monkeypatch)]
    document = {"id": "ask", "blocks": [{"id": "ask", "type": "llm", "with": {
        "prompt": "hello", "model": "openai-compatible/primary/m", "stream": stream,
        "fallback": ["openai-compatible/backup/m"]}}]}
    try:
        results = [await flowforge.run(document, storage=False) for _ in range(100)]
    finally:
        for stop in reversed(stops):      # last started first: see tests/conftest.py
            await stop()
    failed = [r.error for r in results if r.status != "succeeded"]
    assert failed == []
    faults = [mode for mode in primary.seen + backup.seen if mode != "ok"]
    assert len(faults) >= 20 and len(set(faults)) >= 6       # the faults did happen
    assert "cut" in faults                                   # ... a cut stream among them
    if stream:
        # Every answer shown in full exactly once: deltas after the last restart
        # of each call spell the final text.
        for result in results:
            shown = ""
            for event in result.events:
                if event["type"] == "llm_restart":
                    shown = ""
                elif event["type"] == "llm_delta":
                    shown += event["text"]
            assert shown == result.results["ask"]["content"]


class CutOnce(FaultServer):
    """Cuts the first streamed answer after its first chunk, then answers."""

    def next_mode(self) -> str:
        return "cut" if not self.seen else "ok"


async def test_a_stream_cut_mid_answer_is_retried_and_the_consumer_told(quick, monkeypatch):
    server = CutOnce()
    stop = await _serve(server, "faulty", monkeypatch)
    request = LLMRequest(model="m", messages=[Message("user", "hi")], stream=True)
    shown: list[str] = []
    restarts: list[tuple[str, int]] = []
    import os
    try:
        response = await call_model(
            "openai-compatible/faulty/m", request,
            options=ProviderOptions(env=dict(os.environ)),
            on_delta=shown.append,
            on_restart=lambda model, attempt, error: (restarts.append((model, attempt)),
                                                      shown.clear()))
    finally:
        await stop()
    assert server.seen == ["cut", "ok"]
    assert restarts == [("openai-compatible/faulty/m", 1)]
    assert "".join(shown) == response.text == "fine"


async def test_a_cut_stream_goes_to_the_fallback_model(quick, monkeypatch):
    primary, backup = FaultServer("cut"), FaultServer("ok")
    stops = [await _serve(primary, "primary", monkeypatch),
             await _serve(backup, "backup", monkeypatch)]
    document = {"id": "ask", "blocks": [{"id": "ask", "type": "agent", "with": {
        "prompt": "hello", "model": "openai-compatible/primary/m",
        "fallback": ["openai-compatible/backup/m"]}}]}     # agents stream by default
    try:
        result = await flowforge.run(document, storage=False)
    finally:
        for stop in reversed(stops):      # last started first: see tests/conftest.py
            await stop()
    assert result.status == "succeeded", result.error
    assert primary.seen == ["cut"] * 3 and backup.seen == ["ok"]
    kinds = [e["type"] for e in result.events if e["type"] in ("llm_delta", "llm_restart")]
    # Three cut attempts of the primary, each voided before the next answer starts.
    assert kinds == ["llm_delta", "llm_restart"] * 3 + ["llm_delta"]
    assert result.results["ask"]["content"] == "fine"
    assert result.results["ask"]["model"] == "openai-compatible/backup/m"


async def test_a_blocks_timeout_bounds_a_stream_that_only_keeps_alive(quick, monkeypatch):
    """Keep-alive comments reset the idle timer; the block's own `timeout` still
    bounds the whole call, retries included."""
    monkeypatch.setenv("FLOWFORGE_STREAM_IDLE_TIMEOUT", "60")
    stop = await _serve(FaultServer("keepalive"), "faulty", monkeypatch)
    document = {"id": "ask", "blocks": [{"id": "ask", "type": "agent", "timeout": 1,
                                         "with": {"prompt": "hello",
                                                  "model": "openai-compatible/faulty/m"}}]}
    import time
    started = time.monotonic()
    try:
        result = await flowforge.run(document, storage=False)
    finally:
        await stop()
    assert result.status == "failed"
    assert "timed out after 1s" in result.blocks["ask"].error
    assert time.monotonic() - started < 5
