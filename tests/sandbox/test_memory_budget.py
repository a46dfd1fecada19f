"""Sandbox memory is charged to a budget (issue 41): per user and for the
whole process, so one user's many runs of 2 GB blocks cannot take a 24 GB
machine.  A block that does not fit waits (bounded), then fails naming the
budget and its setting; the memory comes back when a block ends, fails or
is cancelled."""

from __future__ import annotations

import asyncio
import os

import pytest

from flowforge.sandbox import Limits, SandboxError, run_python
from flowforge.sandbox.memory import MemoryBudget, install_budget, installed_budget
from flowforge.sandbox.process import sandbox_mode
from tests.sandbox.test_escapes import block

SLOW = block("import time\ntime.sleep(inputs.get('seconds', 0))\nreturn {'ok': True}")
FAILS = block("raise ValueError('no')")


@pytest.fixture
def budget():
    made = MemoryBudget(total_mb=300, per_user_mb=300, wait_seconds=0.5,
                        total_setting="TOTAL_SETTING", user_setting="USER_SETTING")
    install_budget(made)
    yield made
    install_budget(None)


def _limits(mb: int) -> Limits:
    return Limits(memory_mb=mb, wall_seconds=20, cpu_seconds=5)


def _run(mb: int, seconds: float = 0, user: str = "ann", source: str = SLOW):
    return run_python(source, {"seconds": seconds}, limits=_limits(mb), mode=sandbox_mode(),
                      context={"user_id": user})


async def test_two_blocks_that_each_want_more_than_half_wait_then_fail(budget):
    first = asyncio.create_task(_run(200, seconds=3))
    await asyncio.sleep(0.05)
    assert budget.used_mb == 200
    with pytest.raises(SandboxError) as stopped:
        await _run(200, user="bob")                  # the server-wide budget stops it
    assert stopped.value.kind == "budget"
    assert "waited 0.5 s for 200 MB of sandbox memory" in stopped.value.message
    assert "TOTAL_SETTING" in stopped.value.message
    assert (await first).output == {"ok": True}
    assert budget.used_mb == 0 and not budget.by_user


async def test_a_waiting_block_runs_once_the_first_one_gave_its_memory_back(budget):
    budget.wait_seconds = 60
    first = asyncio.create_task(_run(200, seconds=1))
    await asyncio.sleep(0.05)
    second = asyncio.create_task(_run(200))
    await asyncio.sleep(0.3)
    assert not second.done() and budget.used_mb == 200       # it waits: never 400 held
    assert (await first).output == {"ok": True}
    assert (await second).output == {"ok": True}
    assert budget.used_mb == 0


async def test_the_per_user_budget_names_its_setting_and_spares_other_users(budget):
    budget.per_user_mb = 150
    held = asyncio.create_task(_run(100, seconds=2, user="ann"))
    await asyncio.sleep(0.05)
    with pytest.raises(SandboxError) as stopped:
        await _run(100, user="ann")
    assert "this user's sandboxed blocks hold 100 of their 150 MB (USER_SETTING)" in \
        stopped.value.message
    assert (await _run(100, user="bob")).output == {"ok": True}    # another user fits
    await held


async def test_a_block_that_could_never_fit_fails_at_once(budget):
    with pytest.raises(SandboxError) as stopped:
        await _run(400)
    assert stopped.value.kind == "budget" and "more than the 300 MB one user's" in \
        stopped.value.message


async def test_memory_comes_back_when_a_block_fails_or_is_cancelled(budget):
    with pytest.raises(SandboxError):
        await _run(200, source=FAILS)
    assert budget.used_mb == 0
    running = asyncio.create_task(_run(200, seconds=10))
    await asyncio.sleep(0.3)
    budget.wait_seconds = 60
    waiting = asyncio.create_task(_run(200))
    await asyncio.sleep(0.05)
    assert budget.used_mb == 200
    waiting.cancel()
    running.cancel()
    for task in (waiting, running):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert budget.used_mb == 0 and not budget.by_user and not budget._waiters


async def test_no_budget_is_charged_without_one_installed():
    assert installed_budget() is None
    assert (await _run(2048)).output == {"ok": True}


def test_the_server_settings_derive_the_budgets_from_the_machine(monkeypatch):
    from flowforge.sandbox.memory import machine_memory_mb
    from flowforge.server.settings import ServerSettings

    monkeypatch.delenv("FLOWFORGE_SANDBOX_MEMORY_MB", raising=False)
    monkeypatch.delenv("FLOWFORGE_USER_SANDBOX_MEMORY_MB", raising=False)
    made = ServerSettings().memory_budget()
    assert made.total_mb == machine_memory_mb() // 2
    assert made.per_user_mb == made.total_mb // 4
    assert "FLOWFORGE_USER_SANDBOX_MEMORY_MB" in made.user_setting
    monkeypatch.setenv("FLOWFORGE_SANDBOX_MEMORY_MB", "1000")
    assert ServerSettings().memory_budget().per_user_mb == 250


async def test_a_server_charges_its_sandboxed_blocks_while_it_runs(tmp_path):
    from tests.server.conftest import start_server

    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}", sandbox_memory_mb=640)
    try:
        assert installed_budget().total_mb == 640 and installed_budget().per_user_mb == 160
    finally:
        await stop()
    assert installed_budget() is None


def test_a_pool_worker_charges_its_blocks_to_the_machines_budget_shared_by_its_processes(
        monkeypatch):
    """Runs on the pool are held to the budget a server's runs are: a worker
    installs it, and a supervisor of N processes hands each 1/N."""
    from flowforge.cli import worker
    from flowforge.sandbox.memory import install_budget, installed_budget, worker_budget

    monkeypatch.setenv("FLOWFORGE_SANDBOX_MEMORY_MB", "8000")
    monkeypatch.delenv("FLOWFORGE_USER_SANDBOX_MEMORY_MB", raising=False)
    assert (worker_budget(1).total_mb, worker_budget(1).per_user_mb) == (8000, 2000)
    try:
        worker._share_memory(4)                  # the supervisor: shares for its children
        assert installed_budget() is None
        assert os.environ["FLOWFORGE_SANDBOX_MEMORY_MB"] == "2000"
        assert os.environ["FLOWFORGE_USER_SANDBOX_MEMORY_MB"] == "500"
        worker._share_memory(1)                  # a child: its share is its whole
        budget = installed_budget()
        assert (budget.total_mb, budget.per_user_mb) == (2000, 500)
        assert "FLOWFORGE_SANDBOX_MEMORY_MB" in budget.total_setting
    finally:
        install_budget(None)
