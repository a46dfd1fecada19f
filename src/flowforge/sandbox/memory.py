"""The memory sandboxed blocks may hold at once: per user and for the whole process.

A block may ask for up to 2048 MB (`Limits.memory_mb`) and a user may have
many runs at once: 16 runs of such blocks are 32 GB on a 24 GB machine.  So
a server charges each sandboxed block's `memory_mb` to its user's budget
and to the process's before the block's process starts, and gives it back
when the block ends, fails or is cancelled.  A block that does not fit
waits (first come, first served among those that fit) up to `wait_seconds`,
then fails naming the budget and the setting that raises it; a block that
could never fit fails at once.  Nothing is ever over-committed.

The budget is process-wide (`install_budget`): every path to the sandbox
(runs, block tests, the thinker's tries) goes through `run_python`.  None
installed (the CLI, which trusts its user): no budget.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator

from flowforge.errors import RunError

__all__ = ["MemoryBudget", "MemoryBudgetError", "install_budget", "installed_budget",
           "machine_memory_mb", "worker_budget"]


class MemoryBudgetError(RunError):
    """A sandboxed block got no memory within its wait, or could never fit."""


def machine_memory_mb() -> int:
    """The memory this process may use: the machine's RAM, or its cgroup's limit if lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 4 * 1024 ** 3
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as limit:
            text = limit.read().strip()
        if text.isdigit():
            total = min(total, int(text))
    except OSError:
        pass
    return max(1, total // (1024 * 1024))


@dataclass
class MemoryBudget:
    total_mb: int
    """What all sandboxed blocks of this process may hold at once."""
    per_user_mb: int
    """What one user's sandboxed blocks may hold at once."""
    wait_seconds: float = 30.0
    """How long a block waits for memory before it fails."""
    total_setting: str = "the server-wide sandbox memory budget"
    """How an administrator raises `total_mb` (named in errors)."""
    user_setting: str = "the per-user sandbox memory budget"
    """How an administrator raises `per_user_mb` (named in errors)."""
    used_mb: int = 0
    by_user: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()        # runs on other loops (threads) share it
        self._waiters: list[tuple[str, int, asyncio.AbstractEventLoop, asyncio.Future]] = []

    def _fits(self, owner: str, mb: int) -> bool:
        return self.used_mb + mb <= self.total_mb and \
            self.by_user[owner] + mb <= self.per_user_mb

    def _take(self, owner: str, mb: int) -> None:
        self.used_mb += mb
        self.by_user[owner] += mb

    def _refusal(self, owner: str, mb: int) -> str | None:
        if mb > self.per_user_mb:
            return (f"the block asks for {mb} MB of sandbox memory, more than the "
                    f"{self.per_user_mb} MB one user's blocks may hold at once ({self.user_setting}): "
                    f"lower the block's memory_mb or raise that setting")
        if mb > self.total_mb:
            return (f"the block asks for {mb} MB of sandbox memory, more than the "
                    f"{self.total_mb} MB all sandboxed blocks may hold at once "
                    f"({self.total_setting}): lower the block's memory_mb or raise that setting")
        return None

    @asynccontextmanager
    async def hold(self, owner: str, mb: int) -> AsyncIterator[None]:
        """Hold `mb` MB for `owner` while the block runs (waiting for it if need be)."""
        refusal = self._refusal(owner, mb)
        if refusal:
            raise MemoryBudgetError(refusal)
        await self._acquire(owner, mb)
        try:
            yield
        finally:
            self._release(owner, mb)

    async def _acquire(self, owner: str, mb: int) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        waiter = (owner, mb, loop, future)
        with self._lock:
            if self._fits(owner, mb) and not any(self._fits(w[0], w[1])
                                                 for w in self._waiters):
                self._take(owner, mb)
                return
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(future), self.wait_seconds)
        except BaseException as exc:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                    granted = False
                else:
                    granted = True          # granted as the wait ended: give it back
            if granted:
                self._release(owner, mb)
            if isinstance(exc, asyncio.TimeoutError):
                raise MemoryBudgetError(self._timed_out(owner, mb)) from None
            raise

    def _timed_out(self, owner: str, mb: int) -> str:
        with self._lock:
            user_used, used = self.by_user[owner], self.used_mb
        if user_used + mb > self.per_user_mb:
            which = (f"this user's sandboxed blocks hold {user_used} of their "
                     f"{self.per_user_mb} MB ({self.user_setting})")
        else:
            which = (f"sandboxed blocks hold {used} of the {self.total_mb} MB all of them "
                     f"may hold ({self.total_setting})")
        return (f"the block waited {self.wait_seconds:g} s for {mb} MB of sandbox memory "
                f"and got none: {which}; wait for other runs to end, lower the block's "
                f"memory_mb, or raise that setting")

    def _release(self, owner: str, mb: int) -> None:
        with self._lock:
            self.used_mb -= mb
            left = self.by_user[owner] - mb
            if left > 0:
                self.by_user[owner] = left
            else:
                self.by_user.pop(owner, None)
            self._dispatch()

    def _dispatch(self) -> None:
        """Grant waiting blocks that now fit, in their order (under the lock)."""
        for waiter in list(self._waiters):     # first come, first served, if it fits
            who, wanted, loop, future = waiter
            if future.cancelled() or not self._fits(who, wanted):
                continue
            self._waiters.remove(waiter)
            try:
                loop.call_soon_threadsafe(_grant, future)
            except RuntimeError:                 # its loop is closed: nobody waits
                continue
            self._take(who, wanted)


def _grant(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


_INSTALLED: list[MemoryBudget] = []


def install_budget(budget: MemoryBudget | None) -> None:
    """Charge every sandboxed block of this process to `budget` (None: no budget)."""
    _INSTALLED.clear()
    if budget is not None:
        _INSTALLED.append(budget)


def installed_budget() -> MemoryBudget | None:
    return _INSTALLED[0] if _INSTALLED else None


def worker_budget(processes: int = 1) -> MemoryBudget:
    """The budget of one pool worker process: the server's settings, read from
    the same variables with the same defaults (half the machine's memory, a
    quarter of that per user; `server.settings` holds the server's), shared
    among the `processes` worker processes of one machine.  A worker runs
    many users' runs, as a server does: without it, runs on the pool escaped
    the budget a server's own runs are held to."""
    def number(name: str) -> float | None:
        raw = os.environ.get(name, "").strip()
        try:
            return float(raw) if raw else None
        except ValueError:
            raise ValueError(f"{name}={raw!r} is not a number (write e.g. {name}=4096)") from None

    total = int(number("FLOWFORGE_SANDBOX_MEMORY_MB") or machine_memory_mb() // 2)
    per_user = int(number("FLOWFORGE_USER_SANDBOX_MEMORY_MB") or max(1, total // 4))
    share = max(1, processes)
    return MemoryBudget(total_mb=max(1, total // share), per_user_mb=max(1, per_user // share),
                        wait_seconds=number("FLOWFORGE_SANDBOX_MEMORY_WAIT") or 30.0,
                        total_setting=f"FLOWFORGE_SANDBOX_MEMORY_MB, shared by the {share} "
                                      f"worker process(es) of this machine",
                        user_setting=f"FLOWFORGE_USER_SANDBOX_MEMORY_MB, shared by the "
                                     f"{share} worker process(es) of this machine")
