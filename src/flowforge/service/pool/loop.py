"""One event loop per worker process, shared by every run the process runs.

Runs are I/O bound (model calls, HTTP, sleeps), so one process can run many at
once on one loop, as the in-process engine does. On Redis, the worker takes
its messages on this loop too (`redis_consumer`). On another broker, a Celery
worker keeps its `acks_late` promise only if the task returns when its run
ends, so each Celery task (one thread of the worker's `threads` pool) hands
its run to this loop with `asyncio.run_coroutine_threadsafe` and blocks until
the run ends: the message is acknowledged then, and a killed process takes its
unacknowledged messages with it (they come back to the queue).

The loop also keeps one opened storage per database for all its runs: one
connection (pool), one cancel watcher and one lease heartbeat for every run of
the process, instead of one of each per run.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from typing import Any, Awaitable, Callable, TypeVar

from flowforge.storage import Storage, default_database_url, storage_from_url

__all__ = ["ProcessLoop", "process_loop"]

T = TypeVar("T")


class ProcessLoop:
    """An asyncio loop in a background thread, with the storages it opened."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.storages: dict[str, Storage] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True,
                                       name="flowforge-runs-loop")
        self.thread.start()
        ready.wait()

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    async def storage(self, database: str | None) -> Storage:
        """The open storage of `database` (None: the default), opened once."""
        url = database or default_database_url()
        found = self.storages.get(url)
        if found is not None:
            return found
        lock = self._opening.setdefault(url, asyncio.Lock())
        async with lock:
            if url not in self.storages:
                opened = storage_from_url(url)
                await opened.open()
                self.storages[url] = opened
        return self.storages[url]

    def call(self, make: Callable[[Storage], Awaitable[T]], database: str | None) -> T:
        """Run `make(storage)` on the loop and wait for it (from any other thread)."""
        async def go() -> T:
            return await make(await self.storage(database))

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result()

    def spawn(self, make: Callable[[Storage], Awaitable[Any]], database: str | None) -> Any:
        """`call` without waiting: the concurrent future of `make(storage)`."""
        async def go() -> Any:
            return await make(await self.storage(database))

        return asyncio.run_coroutine_threadsafe(go(), self.loop)

    def close(self, timeout: float = 5.0) -> None:
        """Close the storages (pending writes committed) and stop the loop."""
        if not self.loop.is_running():
            return

        async def closing() -> None:
            for storage in list(self.storages.values()):
                try:
                    await storage.close()
                except Exception:  # noqa: BLE001 - closing at exit: nothing to save
                    pass
            self.storages.clear()

        try:
            asyncio.run_coroutine_threadsafe(closing(), self.loop).result(timeout)
        except Exception:  # noqa: BLE001 - a stuck close must not hang the exit
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)


_LOOP: ProcessLoop | None = None
_LOCK = threading.Lock()


def process_loop() -> ProcessLoop:
    """This process's loop, started on first use (a forked child starts its own)."""
    global _LOOP
    with _LOCK:
        if _LOOP is None or _LOOP.pid != os.getpid():
            _LOOP = ProcessLoop()
            atexit.register(_LOOP.close)
        return _LOOP
