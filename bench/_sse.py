"""What a bench needs to follow runs through a server that may die: the server as
a process of its own (`flowforge serve`, killed with SIGKILL like a lost
machine, started again on the same port), and an SSE client that reconnects
with `Last-Event-ID` as a browser's EventSource does, timing each gap.

    server = ServerProcess(folder, env, database, workers="celery")
    await server.start()
    followed = await follow_run(client, run_id)     # client: httpx on server.url
    check_events(followed.events, stored)           # twice / missing / out of order
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import EventSource

from _pool import ROOT

__all__ = ["ServerProcess", "Followed", "follow_run", "sse_events", "check_events",
           "free_port"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """`flowforge serve` in a process group of its own, always on one port, so a
    client's URL outlives each process."""

    def __init__(self, folder: Path, env: dict[str, str], database: str,
                 workers: str = "celery") -> None:
        self.folder, self.env, self.database, self.workers = folder, env, database, workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.starts = 0

    async def start(self, timeout: float = 60.0) -> float:
        """Start a server and wait until it answers /health; the seconds it took."""
        began = time.monotonic()
        log = open(self.folder / f"server-{self.starts}.log", "w")
        self.starts += 1
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flowforge.cli.main", "serve", "--workers", self.workers,
             "--port", str(self.port), "--db", self.database, "--log-level", "warning"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        async with httpx.AsyncClient(base_url=self.url) as client:
            while time.monotonic() - began < timeout:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the server exited with {self.process.returncode}; "
                                       f"see {log.name}")
                try:
                    if (await client.get("/health")).status_code == 200:
                        return time.monotonic() - began
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError(f"the server did not answer /health within {timeout} s")

    def kill(self) -> None:
        """kill -9 the server's whole process group (a lost machine)."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill()


@dataclass
class Followed:
    """What one client saw of one run, over every connection it took."""
    events: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    gaps: list[float] = field(default_factory=list)
    """Seconds from a connection breaking to the next one answering 200."""
    error: str | None = None


async def follow_run(client: httpx.AsyncClient, run_id: str, *, retry: float = 0.1,
                     give_up: float = 300.0, followed: Followed | None = None) -> Followed:
    """Every event of the run until its `run_finished`, reconnecting with the
    `Last-Event-ID` of the last event received whenever the connection breaks
    or the server is not there (connection refused, 5xx).  `followed`: fill
    this one (what was seen so far stays readable if the caller gives up)."""
    followed = followed if followed is not None else Followed()
    path = f"/api/runs/{run_id}/events"
    broken_at: float | None = None
    while True:
        headers = {"Accept": "text/event-stream"}
        if followed.events:
            headers["Last-Event-ID"] = str(followed.events[-1]["seq"])
        try:
            async with client.stream("GET", path, headers=headers) as response:
                if response.status_code >= 500:
                    raise httpx.TransportError(f"status {response.status_code}")
                if response.status_code != 200:
                    followed.error = f"{response.status_code}: {(await response.aread())[:200]!r}"
                    return followed
                followed.connections += 1
                if broken_at is not None:
                    followed.gaps.append(time.monotonic() - broken_at)
                    broken_at = None
                got = 0
                async for event in sse_events(response):
                    followed.events.append(event)
                    got += 1
                    if event["type"] == "run_finished":
                        return followed
            # the stream ended without run_finished: a server stopping cleanly
            # mid-stream (ask again), or a run that ended without one (nothing new)
            if not got:
                followed.error = "the stream ended without run_finished"
                return followed
            broken_at = time.monotonic()
        except httpx.TransportError:
            if broken_at is None:
                broken_at = time.monotonic()
            if time.monotonic() - broken_at > give_up:
                followed.error = f"no server answered for {give_up} s"
                return followed
            await asyncio.sleep(retry)


async def sse_events(response: httpx.Response) -> Any:
    """The run events in an SSE response (pings skipped), each checked: its SSE id is its seq."""
    async for sse in EventSource(response).aiter_sse():
        if not sse.data:
            continue                  # a ping (httpx-sse passes them on, empty)
        event = json.loads(sse.data)
        if sse.id != str(event["seq"]):
            raise AssertionError(f"SSE id {sse.id!r} is not seq {event['seq']}")
        yield event


def check_events(seen: list[dict[str, Any]], stored: list[dict[str, Any]]) -> dict[str, int]:
    """Compare what a client saw with what was stored: events seen more than
    once, stored but never seen, received after a later one, and whether the
    last one seen is the stored terminal event."""
    seqs = [event["seq"] for event in seen]
    counts: dict[int, int] = {}
    for seq in seqs:
        counts[seq] = counts.get(seq, 0) + 1
    stored_seqs = {event["seq"] for event in stored}
    return {"twice": sum(n - 1 for n in counts.values() if n > 1),
            "missing": len(stored_seqs - set(counts)),
            "out_of_order": sum(1 for a, b in zip(seqs, seqs[1:]) if b <= a),
            "unknown": len(set(counts) - stored_seqs),
            "no_terminal": int(not seen or seen[-1]["type"] != "run_finished"
                               or not stored or stored[-1]["seq"] != seen[-1]["seq"])}
