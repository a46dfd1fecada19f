"""A per-user request rate (issue 23): one user's flood is answered 429 with
Retry-After before any work while another user is served as usual; requests
without a valid key count against their address; /health and pages are never
counted; the administrator sets the rate and the burst with `flowforge serve`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from flowforge.server.rate_limit import TokenBuckets
from tests.server.conftest import serve_process, start_server

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")
DOCUMENT = {"id": "tiny", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]}


@pytest.fixture
async def server(tmp_path):
    # one request in 10 s, bursts of 5: a burst of 12 is sure to pass it
    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}", max_user_rate=0.1,
                                    max_user_burst=5)
    yield live
    await stop()


async def test_a_burst_over_the_limit_gets_429_while_another_user_is_served(server):
    async with server.client("alice") as alice, server.client("bob") as bob:
        answers = await asyncio.gather(*(alice.post("/api/validate", json=DOCUMENT)
                                         for _ in range(12)))
        statuses = sorted(a.status_code for a in answers)
        assert statuses.count(200) == 5 and statuses.count(429) == 7, statuses
        refused = next(a for a in answers if a.status_code == 429)
        assert 1 <= int(refused.headers["Retry-After"]) <= 10
        error = refused.json()["error"]
        assert error["code"] == "rate_limited"
        assert "0.1 requests a second" in error["message"] and "bursts of 5" in error["message"]
        assert "--max-user-rate" in error["message"] and "Traceback" not in refused.text
        # bob is served as usual, his whole burst, while alice waits
        served = await asyncio.gather(*(bob.get("/api/me") for _ in range(5)))
        assert [a.status_code for a in served] == [200] * 5
        assert (await alice.get("/api/me")).status_code == 429
        # /health and the web app's pages are never counted
        health = await asyncio.gather(*(alice.get("/health") for _ in range(10)))
        assert {a.status_code for a in health} == {200}
        page = await alice.get("/")
        assert page.status_code != 429


async def test_requests_without_a_valid_key_count_against_their_address(server):
    async with server.client(None) as anonymous, server.client("bob") as bob:
        forged = {"Authorization": "Bearer ff_not-a-key"}
        answers = [await anonymous.get("/api/me", headers=forged) for _ in range(7)]
        statuses = [a.status_code for a in answers]
        assert statuses[:5] == [401] * 5 and statuses[-1] == 429, statuses
        assert (await bob.get("/api/me")).status_code == 200      # bob's key: his own bucket


def test_a_bucket_refills_at_the_rate_up_to_the_burst():
    buckets = TokenBuckets(rate=2.0, burst=3)
    assert [buckets.take("u", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("u", now=0.0) == pytest.approx(0.5)      # the next token in 0.5 s
    assert buckets.take("u", now=0.5) == 0.0
    assert buckets.take("v", now=0.5) == 0.0                     # another key: its own
    assert [buckets.take("u", now=100.0) for _ in range(4)][-1] > 0   # never above the burst


def _serve(tmp_path: Path, *options: str) -> tuple[subprocess.Popen, str, str]:
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    env = {**os.environ, "FLOWFORGE_SECRET_KEY_FILE": str(tmp_path / "secret.key")}
    env.pop("FLOWFORGE_MAX_USER_RATE", None)
    env.pop("FLOWFORGE_MAX_USER_BURST", None)
    made = subprocess.run([FLOWFORGE, "users", "create", "erin", "--db", db], env=env,
                          capture_output=True, text=True, timeout=60)
    key = made.stdout.strip().splitlines()[-1]
    process, url = serve_process([FLOWFORGE, "serve", "--db", db, "--log-level", "warning",
                                  *options], env)
    return process, url, key


def _burst(url: str, key: str, count: int) -> list[int]:
    async def send() -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            answers = await asyncio.gather(*(client.get("/api/me") for _ in range(count)))
        return [a.status_code for a in answers]
    return asyncio.run(send())


@pytest.mark.parametrize("options, refused", [
    ((), False),                                              # default: 50 a second, 100 at once
    (("--max-user-rate", "0.5", "--max-user-burst", "3"), True),
    (("--max-user-rate", "0", "--max-user-burst", "3"), False),          # 0: no limit
])
def test_the_serve_options_set_the_limit(tmp_path, options, refused):
    process, url, key = _serve(tmp_path, *options)
    try:
        statuses = _burst(url, key, 30)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
    assert (429 in statuses) is refused, statuses
    if refused:
        assert statuses.count(200) == 3, statuses
