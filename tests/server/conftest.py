"""A real server on 127.0.0.1 for every test: uvicorn in the test's event
loop, a fresh database, three users (an admin, alice, bob) and the slow
functions the workflows below call.  Streams, disconnects and WebSockets are
exercised over real sockets, as a client would."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

import flowforge
from flowforge.server import ServerSettings, create_app
from flowforge.service.users import create_user
from flowforge.storage import storage_from_url
from flowforge.tls import verified_context
from tests.ports import free_port, listens
from tests.storage.conftest import postgres_schema_url, postgres_url, storage_url  # noqa: F401


@flowforge.function("srv_sleep")
async def srv_sleep(seconds: float = 0.0, value: Any = None) -> dict:
    await asyncio.sleep(seconds)
    return {"value": value}


@flowforge.function("srv_fail")
async def srv_fail(message: str = "boom") -> dict:
    raise RuntimeError(message)


def chain(workflow_id: str = "chain", count: int = 5, seconds: float = 0.01, **extra: Any
          ) -> dict:
    """`count` blocks in a row, each sleeping `seconds`; the last one is the output."""
    blocks = []
    for index in range(count):
        value = "{{input.word}}" if index == 0 else f"{{{{b{index - 1}.value}}}}"
        blocks.append({"id": f"b{index}", "type": "function",
                       "with": {"function": "srv_sleep",
                                "args": {"seconds": seconds, "value": value}}})
    return {"id": workflow_id, "inputs": {"word": {"type": "string", "default": "hi"}},
            "blocks": blocks, **extra}


@dataclass
class Server:
    url: str
    app: Any
    storage: Any
    keys: dict[str, str] = field(default_factory=dict)
    users: dict[str, dict] = field(default_factory=dict)

    def client(self, who: str | None = "alice", **kwargs: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.keys[who]}"} if who else {}
        # the shared TLS context: httpx would load the CA bundle for each client
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30,
                                 verify=verified_context(), **kwargs)

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[len("http"):]


async def start_server(url: str, webhook_client: httpx.AsyncClient | None = None,
                       users_of: Server | None = None, **settings: Any):
    """`users_of`: a server already on this database (a second server process
    shares its users instead of creating them)."""
    storage = storage_from_url(url)
    await storage.open()
    storage.poll_interval = 0.1
    config = dict(max_body_bytes=64 * 1024, webhook_backoff=0.05, webhook_attempts=3,
                  sse_ping_seconds=1.0, allow_private_webhooks=True)   # receivers on loopback
    config.update(settings)
    app = create_app(ServerSettings(**config), storage=storage, webhook_client=webhook_client)
    url, stop_serving = await serve_asgi(app)
    live = Server(url, app, storage)
    if users_of is not None:
        live.users, live.keys = users_of.users, users_of.keys
    else:
        for name, role in (("admin", "admin"), ("alice", "user"), ("bob", "user")):
            user, key = await create_user(storage, name, role)
            live.users[name], live.keys[name] = user, key

    async def stop() -> None:
        await stop_serving()
        await storage.close()

    return live, stop


def serve_process(argv: list[str], env: dict[str, str], attempts: int = 3
                  ) -> tuple[subprocess.Popen, str]:
    """`argv` (a `flowforge serve` command line) with `--port` on a free loopback
    port, once it answers /health itself: (process, base URL).  A port found
    free is free only until someone binds it: with four workers starting
    servers, another test's server took one between the pick and this
    server's bind, answered /health in its place, and the test sent its
    requests there (30 times 401; `tests.ports`).  Then another port is tried."""
    for _ in range(attempts):
        port = free_port()
        process = subprocess.Popen([*argv, "--port", str(port)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(process, url)
            return process, url
        except PortTaken:
            continue
    pytest.fail(f"{attempts} free ports were each taken by another server before "
                f"`{' '.join(argv)}` bound them")


class PortTaken(Exception):
    """Another process listens on the port the server was started on."""


def wait_healthy(process: subprocess.Popen, url: str, seconds: float = 30.0) -> None:
    """Wait until a `flowforge serve` process answers /health on the port of
    `url` (a /health from another process on that port does not count); fail
    the test, with what it wrote to a piped stderr, if it exits or is not up in
    time; PortTaken when it exits because another process holds the port."""
    deadline = time.monotonic() + seconds
    port = int(url.rsplit(":", 1)[1])
    while True:
        if process.poll() is not None:
            said = process.stderr.read().decode()[-2000:] if process.stderr else ""
            if "already in use" in said:
                raise PortTaken(said)
            pytest.fail(f"the server exited before it answered /health: {said}")
        try:
            answer = httpx.get(f"{url}/health", timeout=2, verify=verified_context())
            if answer.status_code == 200 and listens(process.pid, port):
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"the server did not start within {seconds} s"
        time.sleep(0.1)


async def serve_asgi(app: Any):
    """Serve an ASGI app with uvicorn on a free loopback port in this event
    loop: `(base_url, stop)`."""
    # IPPROTO_TCP named, as getaddrinfo gives it to `flowforge serve`: asyncio sets
    # TCP_NODELAY only on sockets whose proto says TCP, and without it each answer
    # (headers, then body) waited ~40 ms for the client's delayed ACK
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                           timeout_graceful_shutdown=2))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)

    async def stop() -> None:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()

    return f"http://127.0.0.1:{port}", stop


@pytest.fixture
async def server(tmp_path, monkeypatch):
    """A server on SQLite, its secrets sealed with a key of its own."""
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    yield live
    await stop()


@pytest.fixture
async def any_server(storage_url):  # noqa: F811 - the fixture imported above
    """The same server on SQLite and on PostgreSQL."""
    live, stop = await start_server(storage_url)
    yield live
    await stop()


async def read_sse(client: httpx.AsyncClient, path: str, *, headers: dict | None = None,
                   stop_after: int | None = None, on_event: Any = None) -> list[dict]:
    """The events of an SSE response, parsed; stops (disconnecting) after
    `stop_after` events, else at the end of the stream."""
    import json

    from httpx_sse import EventSource

    events: list[dict] = []
    async with client.stream("GET", path, headers=headers or {}) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for sse in EventSource(response).aiter_sse():
            if not sse.data:
                continue                  # a ping (httpx-sse passes them on, empty)
            event = json.loads(sse.data)
            assert sse.id == str(event["seq"]) and sse.event == event["type"]
            events.append(event)
            if on_event is not None:
                await on_event(event)
            if stop_after is not None and len(events) >= stop_after:
                break
    return events


async def wait_for_status(live: Server, run_id: str, *statuses: str, timeout: float = 10
                          ) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        run = await live.storage.get_run(run_id)
        if run and run["status"] in statuses:
            return run
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"run {run_id} is {run and run['status']}, not {statuses}")
        await asyncio.sleep(0.02)
