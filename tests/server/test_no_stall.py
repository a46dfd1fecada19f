"""No request may stall the server (issue 23), replayed as an ordinary user:
each request that once froze `/health` for seconds is sent while another
client polls `/health`, and gets its ordinary answer while `/health` keeps
answering.  (bench/stalls.py measures the p99 against a `flowforge serve`
process; here the bound is loose, for a busy CI machine.)"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.server.conftest import start_server

#: A stall is the server busy with one request while `/health` waits.  The
#: stalls of the issue lasted 5 s to 36 s.  The server here shares its process
#: (and the GIL) with the test on a loaded 2-core CI machine, where a `/health`
#: answer can also be slow because the process got no CPU at all (one suite run
#: saw 3.6 s of wall time): so the bound is on the process's CPU time spent
#: while a `/health` answer was awaited (a stall burns it; a starved process
#: does not), and a wall time past HEALTH_WALL_BOUND fails whatever the cause.
#: bench/stalls.py measures the real p99 against a `flowforge serve` process.
HEALTH_BOUND = 3.0
HEALTH_WALL_BOUND = 10.0


@pytest.fixture
async def roomy(tmp_path):
    """A server that takes the 100 kB bodies of the reports."""
    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}",
                                    max_body_bytes=1024 * 1024)
    yield live
    await stop()


async def while_polling_health(live, attack):
    """(what `attack()` returned, the most CPU the server's process spent while
    one /health answer was awaited)."""
    slowest = 0.0
    done = asyncio.Event()

    async def poll() -> None:
        nonlocal slowest
        async with live.client(None) as anonymous:
            while not done.is_set():
                started, busy = time.perf_counter(), time.process_time()
                assert (await anonymous.get("/health")).status_code == 200
                wall = time.perf_counter() - started
                assert wall < HEALTH_WALL_BOUND, f"/health took {wall:.1f} s"
                slowest = max(slowest, min(wall, time.process_time() - busy))
                await asyncio.sleep(0.01)

    poller = asyncio.create_task(poll())
    await asyncio.sleep(0.05)
    try:
        result = await attack()
    finally:
        done.set()
        await poller
    return result, slowest


async def validate(client, text: str) -> dict:
    response = await client.post("/api/validate", content=text.encode(),
                                 headers={"Content-Type": "application/yaml"})
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_unclosed_template_of_100000_spaces(roomy):
    async with roomy.client() as alice:
        body, slowest = await while_polling_health(
            roomy, lambda: validate(alice, "{{" + " " * 100_000))
    assert body["valid"] is False and body["problems"]
    assert slowest < HEALTH_BOUND


async def test_a_parser_schema_notation_of_100000_spaces(roomy):
    text = ("id: w\nblocks:\n  - id: p\n    type: parser\n    with:\n      text: 'x'\n"
            "      schema: 'Array<" + " " * 100_000 + "'\n")
    async with roomy.client() as alice:
        body, slowest = await while_polling_health(roomy, lambda: validate(alice, text))
    assert body["valid"] is False
    assert body["problems"][0]["where"] == "blocks[0].with.schema"
    assert "unknown type" in body["problems"][0]["message"]
    assert slowest < HEALTH_BOUND


async def test_an_input_pattern_with_nested_quantifiers(roomy):
    text = ("id: w\ninputs:\n  code: {type: string, pattern: '^(a+)+$'}\n"
            "triggers:\n  - {cron: '0 * * * *', inputs: {code: '" + "a" * 50_000 + "!'}}\n"
            "blocks:\n  - {id: s, type: set, with: {c: '{{input.code}}'}}\n")
    async with roomy.client() as alice:
        body, slowest = await while_polling_health(roomy, lambda: validate(alice, text))
        assert (await alice.put("/api/workflows/w", content=text.replace(
            "a" * 50_000 + "!", "aaa").encode(),
            headers={"Content-Type": "application/yaml"})).status_code == 201

        async def start():
            return await alice.post("/api/workflows/w/runs",
                                    json={"inputs": {"code": "a" * 100_000 + "!"}})

        refused, slowest_run = await while_polling_health(roomy, start)
    assert body["valid"] is False
    assert body["problems"][0]["where"] == "triggers[0].inputs"
    assert "does not match" in body["problems"][0]["message"]
    assert refused.status_code == 422 and "does not match" in refused.text
    assert max(slowest, slowest_run) < HEALTH_BOUND


async def test_a_registry_block_whose_example_hits_a_bad_pattern(roomy):
    block = {"id": "slow_example", "name": "Slow example", "description": "checks a code",
             "execution_type": "python",
             "source_code": "async def execute(inputs, context):\n    return {'ok': True}\n",
             "input_schema": {"type": "object", "properties": {
                 "code": {"type": "string", "pattern": "^(a+)+$"}}},
             "output_schema": {"type": "object"},
             "examples": [{"inputs": {"code": "a" * 50_000 + "!"}, "outputs": {"ok": True}}]}
    async with roomy.client() as alice:
        # the registry's first use loads the starter library: not the attack's cost
        assert (await alice.get("/api/blocks/slow_example")).status_code == 404
        response, slowest = await while_polling_health(
            roomy, lambda: alice.post("/api/blocks", json=block))
    assert response.status_code == 422, response.text
    assert "examples[0].inputs" in response.text and "does not match" in response.text
    assert slowest < HEALTH_BOUND


async def test_four_users_event_floods_do_not_hold_the_others(roomy):
    flood = {"id": "flood", "blocks": [
        {"id": "spin", "type": "loop", "with": {"times": 100_000, "max_iterations": 100_000},
         "blocks": [{"id": "step", "type": "set", "with": {"i": "{{loop.index}}"}}]}]}
    clients = [roomy.client(name) for name in ("alice", "bob", "admin", "alice")]
    for client in clients[:3]:
        assert (await client.post("/api/workflows", json=flood)).status_code == 201

    async def four_floods():
        return await asyncio.gather(*(client.post("/api/workflows/flood/runs?wait=true",
                                                  json={}) for client in clients))

    try:
        answers, slowest = await while_polling_health(roomy, four_floods)
    finally:
        for client in clients:
            await client.aclose()
    for answer in answers:
        run = answer.json()
        assert run["status"] == "failed"
        assert "FLOWFORGE_MAX_LOOP_PASSES" in run["blocks"]["spin"]["error"]
    assert slowest < HEALTH_BOUND
