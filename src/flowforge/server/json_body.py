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
same bytes a piece at a time (a block's output, an event), letting the loop
serve others between pieces.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator, Mapping

import orjson
from fastapi.responses import JSONResponse, Response

__all__ = ["FastJSONResponse", "json_in_steps", "json_response_in_steps", "STEP_BYTES"]

#: Bytes of JSON written between two chances for the loop to serve others.
STEP_BYTES = 1_000_000

_OPTIONS = orjson.OPT_NON_STR_KEYS


class FastJSONResponse(JSONResponse):
    """A JSONResponse rendered by orjson (the same bytes for the same plain data)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=str, option=_OPTIONS)


def _dumps(value: Any) -> bytes:
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


async def json_in_steps(content: Any, depth: int = 3) -> bytes:
    """`content` as the JSON FastJSONResponse writes, encoded a piece at a time
    (a run's result: each block's output, each event), the loop free between
    every STEP_BYTES of it."""
    parts: list[bytes] = []
    since = 0
    for piece in _pieces(content, depth):
        parts.append(piece)
        since += len(piece)
        if since >= STEP_BYTES:
            since = 0
            await asyncio.sleep(0)
    return b"".join(parts)


async def json_response_in_steps(content: Any, status_code: int = 200,
                                 headers: Mapping[str, str] | None = None) -> Response:
    """A response of `content` as FastJSONResponse answers it, written by
    `json_in_steps` (for a run's result, which may hold megabytes)."""
    return Response(await json_in_steps(content), status_code=status_code,
                    headers=headers, media_type="application/json")
