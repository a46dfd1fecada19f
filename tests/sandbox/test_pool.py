"""Waiting sandbox processes: a block runs in a process started before it was
needed (the start is most of a block's cost), never in one that ran another
block, and never in one a forked parent started."""

from __future__ import annotations

import os

import pytest

from flowforge.sandbox import run_python
from flowforge.sandbox.process import _POOL, _Child
from tests.sandbox.test_escapes import _modes, block

SOURCE = block('return {"double": inputs["n"] * 2}')


@pytest.fixture(params=_modes())
def pool_mode(request, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SANDBOX_WARM", "1")
    _POOL.close()
    yield request.param
    _POOL.close()


async def test_the_next_block_runs_in_the_process_that_was_waiting(pool_mode):
    first = await run_python(SOURCE, {"n": 1}, mode=pool_mode)
    assert first.output == {"double": 2}
    [waiting] = _POOL.idle[pool_mode]
    assert waiting.alive()
    second = await run_python(SOURCE, {"n": 2}, mode=pool_mode)
    assert second.output == {"double": 4}
    assert waiting.proc.returncode is not None          # used once, then gone
    [replacement] = _POOL.idle[pool_mode]
    assert replacement is not waiting and replacement.alive()


async def test_no_process_waits_when_the_pool_is_off(pool_mode, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SANDBOX_WARM", "0")
    assert (await run_python(SOURCE, {"n": 3}, mode=pool_mode)).output == {"double": 6}
    assert _POOL.idle.get(pool_mode, []) == []


def test_a_forked_child_does_not_use_its_parents_waiting_processes(pool_mode):
    _POOL.refill(pool_mode)
    [waiting] = _POOL.idle[pool_mode]
    pid = os.fork()
    if pid == 0:                                     # the child: a fresh, empty pool
        from flowforge.sandbox import process
        os._exit(0 if process._POOL.idle == {} else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _POOL.idle[pool_mode] == [waiting] and waiting.alive()


def test_a_waiting_process_that_gets_no_job_exits_quietly(pool_mode):
    child = _Child(pool_mode)
    child.proc.stdin.close()                         # its parent went away
    assert child.proc.wait(timeout=10) == 0
    assert child.proc.stderr.read() == b""
    child.discard()


def test_closing_the_pool_stops_every_waiting_process(pool_mode):
    _POOL.refill(pool_mode)
    children = list(_POOL.idle[pool_mode])
    _POOL.close()
    assert children and all(c.proc.returncode is not None for c in children)
    assert _POOL.idle[pool_mode] == []
