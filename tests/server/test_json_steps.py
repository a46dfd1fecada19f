"""A run's result is written a piece at a time (server/json_body.py): the
bytes a client gets are exactly those of encoding it in one piece."""

from __future__ import annotations

import asyncio
import math

import orjson

from flowforge.server import json_body
from flowforge.server.json_body import FastJSONResponse, json_in_steps


def test_a_result_written_in_steps_is_the_same_bytes_as_in_one_piece(monkeypatch):
    monkeypatch.setattr(json_body, "STEP_BYTES", 10)        # a step after every piece
    content = {"run_id": "r", "status": "failed", "outputs": {},
               "results": {"a0": {"v": "y" * 1000, "é": "☃"}, "a1": {"v": None},
                           "n": {1: "int key", "x": [1, 2.5, math.nan]}},
               "blocks": {"a0": {"status": "succeeded", "error": None}},
               "usage": {"tokens": 0, "cost": 0.0, "per_block": {}},
               "memory": {}, "events": [{"seq": 1, "type": "run_started", "data": {}},
                                        {"seq": 2, "tuple": (1, "two"), "when": object}],
               "empty": [], "workflow_version": 3}
    whole = FastJSONResponse(content).body
    assert b"".join(asyncio.run(json_in_steps(content))) == whole
    assert orjson.loads(whole)["results"]["n"]["1"] == "int key"


def test_the_loop_serves_others_between_the_steps():
    turns = 0

    async def main() -> bytes:
        async def count() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count())
        await asyncio.sleep(0)
        body = b"".join(await json_in_steps({"events": [{"v": "x" * 600_000} for _ in range(10)]}))
        counter.cancel()
        return body

    body = asyncio.run(main())
    assert len(orjson.loads(body)["events"]) == 10
    assert turns >= 4             # 6 MB in steps of ~1 MB: others ran between them


def test_the_chunks_are_sent_as_one_body_of_its_length():
    import httpx
    from starlette.applications import Starlette
    from starlette.routing import Route

    from flowforge.server.json_body import json_response_in_steps

    content = {"events": [{"seq": n, "v": "é" * 50_000} for n in range(30)]}

    async def route(request):
        return await json_response_in_steps(content, headers={"X-Test": "1"})

    async def fetch() -> httpx.Response:
        app = Starlette(routes=[Route("/", route)])
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as client:
            return await client.get("/")

    answer = asyncio.run(fetch())
    assert answer.content == FastJSONResponse(content).body
    assert int(answer.headers["content-length"]) == len(answer.content)
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["x-test"] == "1"
