"""A pool run's webhook is durable: it is owed on the run's row from the moment
the server queues the run, and whichever process sees the run ended first (the
worker that finished it, the server, any reaper) claims and posts it, once.  So
a server killed -9 right after queueing the run loses no webhook, and a live
server and the worker never both post it."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flowforge.service.users import create_user
from flowforge.service.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from flowforge.storage import storage_from_url
from tests.server.conftest import start_server, wait_for_status
from tests.workers.test_pool import chain, ended, wait_for
from tests.workers.test_server_restart import ServerProcess

import httpx


class Receiver:
    """A webhook receiver on loopback that keeps every POST (headers, body)."""

    def __init__(self) -> None:
        posts: list[tuple[dict, bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                posts.append((dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.posts = posts
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def delivered(row: dict) -> bool:
    return row.get("webhook_state") == "delivered"


def _signed_once(receiver: Receiver, secret: str, run_id: str) -> dict:
    assert len(receiver.posts) == 1, [h.get("X-Flowforge-Delivery") for h, _ in receiver.posts]
    headers, body = receiver.posts[0]
    assert verify(secret, headers[TIMESTAMP_HEADER], body, headers[SIGNATURE_HEADER])
    payload = json.loads(body)
    assert payload["run_id"] == run_id and payload["event"] == "run_finished"
    return payload


async def test_a_server_killed_after_queueing_loses_no_webhook(pool, tmp_path):
    receiver = Receiver()
    storage = storage_from_url(pool.database)
    await storage.open()
    user, key = await create_user(storage, "alice", "user")
    server = ServerProcess(pool, tmp_path)
    server.options = ("--allow-private-webhooks",)          # the receiver is on loopback
    try:
        await server.start()                                # no worker yet
        async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            saved = await client.post("/api/workflows", json=chain(2, 0.05, tmp_path / "log"))
            assert saved.status_code == 201, saved.text
            started = await client.post("/api/workflows/chain/runs",
                                        json={"webhook": receiver.url})
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
        server.kill()                                       # kill -9: nobody follows the run
        assert (await storage.get_run(run_id))["status"] == "queued"
        pool.start()
        row = await wait_for(storage, run_id, ended, timeout=60)
        assert row["status"] == "succeeded"
        await wait_for(storage, run_id, delivered, timeout=30)
        await asyncio.sleep(2.5)           # a reaper's look after it: nothing owed, no repost
        payload = _signed_once(receiver, user["webhook_secret"], run_id)
        assert payload["status"] == "succeeded"
        attempts = await storage.list_deliveries(run_id)
        assert [(a["attempt"], a["succeeded"]) for a in attempts] == [(1, True)]
    finally:
        server.stop()
        receiver.close()
        await storage.close()


async def test_a_live_server_and_the_worker_post_a_pool_run_webhook_once(pool, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    receiver = Receiver()
    pool.start()
    live, stop = await start_server(pool.database, workers="celery", resume_interval=0.2)
    try:
        async with live.client("alice") as alice:
            await alice.post("/api/workflows", json=chain(1, 0.05, tmp_path / "log"))
            done = await alice.post("/api/workflows/chain/runs?wait=true",
                                    json={"webhook": receiver.url})
            assert done.status_code == 200 and done.json()["status"] == "succeeded", done.text
            run_id = done.json()["run_id"]
        await wait_for_status(live, run_id, "succeeded")
        await wait_for(live.storage, run_id, delivered, timeout=30)
        await asyncio.sleep(1.0)                  # the server's resumer looked again
    finally:
        await stop()
        receiver.close()
    _signed_once(receiver, live.users["alice"]["webhook_secret"], run_id)
