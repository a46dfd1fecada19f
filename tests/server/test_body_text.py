"""A lone surrogate in a JSON body (issue 17) is a 422 naming the field, not a
UnicodeEncodeError when the value reaches the database; an escaped backslash
followed by `ud800` is ordinary text and passes."""

from __future__ import annotations

import pytest

from flowforge.server.body_text import lone_surrogate
from tests.server.conftest import chain


@pytest.mark.parametrize("body, where", [
    (rb'"\ud800"', "body"),
    (rb'{"inputs": {"name": "ok", "word": "a\udfffb"}}', "body.inputs.word"),
    (rb'{"blocks": [{"id": "a"}, {"id": "b", "with": {"x": ["\ud83d"]}}]}',
     "body.blocks[1].with.x[0]"),
    (rb'{"inputs": {"\udc00key": 1}}', "body.inputs.?key"),
    (rb'{"a": "\ud83d\ude00 then \ud83d alone"}', "body.a"),
])
def test_a_lone_half_is_found_and_located(body, where):
    found = lone_surrogate(body)
    assert found is not None and found[0] == where
    assert "lone surrogate" in found[1]


@pytest.mark.parametrize("body", [
    rb'{"emoji": "\ud83d\ude00"}',                          # a pair is one character
    rb'{"pattern": "\\ud83d[\\ude00-\\ude4f]"}',             # backslashes, then letters
    rb'{"path": "C:\\ud800 folder"}',
    b'{"plain": "caf\xc3\xa9"}',
    rb'{"broken": "\ud800',                                  # not JSON: the route answers
    b"[" * 5000 + rb'"\ud800"' + b"]" * 5000,               # too deep to parse: no crash
])
def test_text_without_a_lone_half_passes(body):
    assert lone_surrogate(body) is None


async def test_the_server_answers_422_naming_the_field(server):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=1, seconds=0))
        refused = await client.post("/api/workflows/chain/runs",
                                    content=rb'{"inputs": {"word": "x\ud800"}}',
                                    headers={"Content-Type": "application/json"})
        document = rb'{"id": "regex", "blocks": [{"id": "a", "type": "set", ' \
                   rb'"with": {"pattern": "\\ud83d[\\ude00-\\ude4f]"}}]}'
        saved = await client.post("/api/workflows", content=document,
                                  headers={"Content-Type": "application/json"})
        stored = (await client.get("/api/workflows/regex")).json()
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["details"] == [{"where": "body.inputs.word", "message": error["details"][0][
        "message"]}] and "lone surrogate \\ud800" in error["message"]
    assert saved.status_code == 201, saved.text
    assert stored["document"]["blocks"][0]["with"]["pattern"] == "\\ud83d[\\ude00-\\ude4f]"
