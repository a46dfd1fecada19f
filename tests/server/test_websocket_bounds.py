"""The WebSocket's `?after=` (issue 17): a sequence number past 64 bits or a
digit that is not ASCII ('²' passes `str.isdigit`, `int` refuses it) is
refused with an error message and close code 4400, never a dropped
connection; the largest 64-bit number is accepted (nothing follows it)."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import websockets

from tests.server.conftest import chain


async def _follow(server, after: str) -> tuple[int | None, list[dict]]:
    async with server.client() as client:
        await client.post("/api/workflows", json=chain(count=1, seconds=0))
        run = (await client.post("/api/workflows/chain/runs?wait=true", json={})).json()
    url = (f"{server.ws_url}/ws/runs/{run['run_id']}?token={server.keys['alice']}"
           f"&after={quote(after)}")
    messages = []
    async with websockets.connect(url) as socket:
        try:
            async for message in socket:
                messages.append(json.loads(message))
        except websockets.ConnectionClosed:
            pass
    return socket.close_code, messages


@pytest.mark.parametrize("after", [str(2**63), str(2**64), "\u00b2", "\u0663", "-1", "1e3"])
async def test_a_bad_after_is_refused_with_a_message(server, after):
    code, messages = await _follow(server, after)
    assert code == 4400, (code, messages)
    assert [m["type"] for m in messages] == ["error"]
    assert "after=" in messages[0]["error"]["message"]


async def test_the_largest_sequence_number_is_accepted(server):
    code, messages = await _follow(server, str(2**63 - 1))
    assert (code, messages) == (1000, [])
