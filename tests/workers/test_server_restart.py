"""A server on the pool killed with SIGKILL while a client follows a run's events:
the worker goes on (the run is its, not the server's), a new server process on
the same database and broker takes the client's reconnect with `Last-Event-ID`,
and the client ends up with every stored event exactly once, in order, up to
the run's end - the events stored while no server lived included."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from httpx_sse import EventSource
import pytest

from flowforge.service.users import create_user
from flowforge.storage import storage_from_url
from tests.ports import free_port, listens
from tests.workers.conftest import ROOT
from tests.workers.test_pool import chain, ended, wait_for


class ServerProcess:
    """`flowforge serve --workers celery` as a process of its own (kill -9 is a
    lost machine), always on the same port so a client's URL outlives it."""

    def __init__(self, pool, folder: Path) -> None:
        self.pool, self.folder, self.port = pool, folder, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.options: tuple[str, ...] = ()          # more `flowforge serve` options

    async def start(self) -> None:
        log_path = self.folder / f"server-{self.starts}.log"
        log = open(log_path, "w")
        self.starts += 1
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flowforge.cli.main", "serve", "--workers", "celery",
             "--port", str(self.port), "--db", self.pool.database, "--log-level", "warning",
             *self.options],
            cwd=ROOT, env=self.pool.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(base_url=self.url) as client:
            while time.monotonic() < deadline:
                assert self.process.poll() is None, log_path.read_text()
                try:
                    if (await client.get("/health")).status_code == 200 and \
                            listens(self.process.pid, self.port):     # (tests.ports)
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError("the server did not answer /health within 60 s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


async def follow(client: httpx.AsyncClient, path: str, seen: list[dict],
                 last_event_id: int | None = None, on_event=None) -> None:
    """Append the events of one SSE connection to `seen` as they come; returns
    when the stream ends, raises httpx.TransportError when the server goes."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    async with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for sse in EventSource(response).aiter_sse():
            if not sse.data:
                continue                  # a ping (httpx-sse passes them on, empty)
            event = json.loads(sse.data)
            assert sse.id == str(event["seq"])
            seen.append(event)
            if on_event is not None:
                on_event(event)


async def test_a_server_killed_mid_stream_loses_no_event_and_no_run(pool, tmp_path):
    log = tmp_path / "steps.log"
    storage = storage_from_url(pool.database)
    await storage.open()
    _user, key = await create_user(storage, "alice", "user")
    pool.start()
    server = ServerProcess(pool, tmp_path)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            saved = await client.post("/api/workflows", json=chain(8, 0.4, log))
            assert saved.status_code == 201, saved.text
            started = await client.post("/api/workflows/chain/runs", json={})
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            path = f"/api/runs/{run_id}/events"
            seen: list[dict] = []

            def kill_after_the_second_block(event: dict) -> None:
                if event["type"] == "block_succeeded" and event["block_id"] == "s1":
                    server.kill()            # while this stream is open

            with pytest.raises(httpx.TransportError):
                await follow(client, path, seen, on_event=kill_after_the_second_block)
            cut_at = seen[-1]["seq"]
            assert seen[-1]["type"] != "run_finished"
            # no server lives; the worker goes on storing the run's events
            deadline = time.monotonic() + 30
            while len(await storage.get_events(run_id, cut_at)) < 3:
                assert time.monotonic() < deadline, "the worker stopped with the server"
                await asyncio.sleep(0.05)
            await server.start()
            await follow(client, path, seen, last_event_id=cut_at)

        stored = await storage.get_events(run_id)
        assert [e["seq"] for e in seen] == [e["seq"] for e in stored]   # once each, in order
        assert seen == json.loads(json.dumps(stored, default=str))
        assert seen[-1]["type"] == "run_finished" and seen[-1]["status"] == "succeeded"
        row = await wait_for(storage, run_id, ended, timeout=10)
        assert row["status"] == "succeeded"
        # the worker never stopped: one start, every block run once
        assert [e["type"] for e in stored].count("run_started") == 1
        lines = log.read_text().split("\n")
        assert sorted(line.split()[:2] for line in lines if line) == sorted(
            [kind, str(n)] for n in range(8) for kind in ("start", "end"))
    finally:
        server.stop()
        await storage.close()
