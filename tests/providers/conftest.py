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
from flowforge.providers.resolve import clear_provider_cache
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


class ClosingServer:
    """A raw HTTP/1.1 server on 127.0.0.1 whose answers are delimited by closing the
    connection: no Content-Length, no chunked encoding (legal HTTP/1.1).  A body cut
    short is then indistinguishable, at the HTTP level, from a whole one: only the
    answer's own end marker tells them apart.  Answer `i` is `answers[i]` (the last
    repeats): `(content_type, [body parts])`; the body is written part by part, then
    the connection is closed.  Keeps every request's path and parsed JSON body."""

    def __init__(self, *answers: tuple[str, list[bytes]]) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.server: Any = None

    async def __aenter__(self) -> ClosingServer:
        import asyncio

        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: Any) -> None:
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: Any, writer: Any) -> None:
        import asyncio

        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", 0)))
            self.requests.append((lines[0].split(" ")[1], json.loads(body or b"{}")))
            content_type, parts = self.answers[min(len(self.requests), len(self.answers)) - 1]
            writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n"
                         f"Connection: close\r\n\r\n".encode())
            for part in parts:
                writer.write(part)
                await writer.drain()
                await asyncio.sleep(0.005)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass            # the client went away first (it gave up, or the test ended)
        finally:
            writer.close()


def sse_bytes(*events: tuple[str | None, dict[str, Any] | str]) -> list[bytes]:
    """Server-sent events as body parts, one per event (a str data is sent as is)."""
    out = []
    for name, data in events:
        text = f"event: {name}\n" if name else ""
        out.append((text + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
                   .encode())
    return out
