"""JSON response bodies written by orjson, not the standard library.

A run's result (`?wait=true`, `GET /api/runs/{id}`) carries every block's
output and every event, and the event loop writes it while it serves everyone
else: 16 runs whose values reached the 16 MB limit answered ~50 MB each, and
`json.dumps` held the loop for 2-4 s at a time (`bench/stalls.py --only
doubling`); orjson writes the same in a tenth of the time.  What the standard
encoder refused (NaN) is written as null, and a key that is not a string as
its text, as the store writes them (storage/encoding.py).

Even so, one 16 MB answer took orjson 13-20 ms in one piece: a loop turn that
every other request (a `/health`) waited behind.  `json_in_steps` writes the
same bytes a piece at a time (a block's output, an event), and
`ChunksResponse` sends them so, letting the loop serve others between pieces.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator, Mapping

import orjson
from fastapi.responses import JSONResponse, Response

__all__ = ["FastJSONResponse", "ChunksResponse", "json_in_steps", "json_response_in_steps",
           "STEP_BYTES"]

#: Bytes of JSON written between two chances for the loop to serve others.
STEP_BYTES = 1_000_000

_OPTIONS = orjson.OPT_NON_STR_KEYS


class FastJSONResponse(JSONResponse):
    """A JSONResponse rendered by orjson (the same bytes for the same plain data)."""

    def render(self, content: Any) -> bytes:
        return _dumps(content)


def _dumps(value: Any) -> bytes:
    """The one encoding of a response body, whole (FastJSONResponse) or in pieces."""
    return orjson.dumps(value, default=str, option=_OPTIONS)


def _pieces(value: Any, depth: int) -> Iterator[bytes]:
    """`_dumps(value)` as consecutive pieces, opening dicts (of string keys) and
    lists `depth` levels deep: joined, the very same bytes."""
    if depth and type(value) is dict and value and all(type(k) is str for k in value):
        first = True
        for key, item in value.items():
            yield (b"{" if first else b",") + _dumps(key) + b":"
            first = False
            yield from _pieces(item, depth - 1)
        yield b"}"
    elif depth and type(value) is list and value:
        for index, item in enumerate(value):
            yield b"," if index else b"["
            yield from _pieces(item, depth - 1)
        yield b"]"
    else:
        yield _dumps(value)


async def json_in_steps(content: Any, depth: int = 3) -> list[bytes]:
    """`content` as the JSON FastJSONResponse writes, encoded a piece at a time
    (a run's result: each block's output, each event), the loop free between
    every STEP_BYTES of it: the chunks to send, in order (never joined: copying
    16 MB into one new string took 10-15 ms, mostly the kernel handing over
    fresh pages)."""
    chunks: list[bytes] = []
    small: list[bytes] = []
    held = since = 0
    for piece in _pieces(content, depth):
        since += len(piece)
        if len(piece) >= _SMALL:
            if small:
                chunks.append(b"".join(small))
                small, held = [], 0
            chunks.append(piece)
        else:
            small.append(piece)
            held += len(piece)
            if held >= _SMALL:
                chunks.append(b"".join(small))
                small, held = [], 0
        if since >= STEP_BYTES:
            since = 0
            await asyncio.sleep(0)
    if small:
        chunks.append(b"".join(small))
    return chunks


#: Pieces under this size are sent together (one socket write each cost a system call).
_SMALL = 64 * 1024


class ChunksResponse(Response):
    """A response whose body is sent as the chunks it was encoded in (with
    its Content-Length), the loop free between every STEP_BYTES of them."""

    media_type = "application/json"

    def __init__(self, chunks: list[bytes], status_code: int = 200,
                 headers: Mapping[str, str] | None = None) -> None:
        self.chunks = chunks
        length = str(sum(map(len, chunks)))
        super().__init__(None, status_code, {**(headers or {}), "content-length": length})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        since = 0
        chunks, self.chunks = self.chunks[::-1], []
        while chunks:               # each chunk let go once sent: a slow reader of a big
            chunk = chunks.pop()    # result holds what is left to send, not all of it
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            since += len(chunk)
            if since >= STEP_BYTES:
                since = 0
                await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.background is not None:
            await self.background()


async def json_response_in_steps(content: Any, status_code: int = 200,
                                 headers: Mapping[str, str] | None = None) -> Response:
    """A response of `content` as FastJSONResponse answers it, encoded and sent
    a piece at a time (`json_in_steps`: a run's result may hold megabytes)."""
    return ChunksResponse(await json_in_steps(content), status_code, headers)
