"""`run` and `start_run` read their arguments the same way, and `run_sync`
says what to do inside a running loop (issue 15)."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.storage import storage_from_url

DOC = {"id": "tiny", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]}


async def _stored(run_id: str):
    storage = storage_from_url()          # the default database (per test, see conftest)
    await storage.open()
    try:
        return await storage.get_run(run_id)
    finally:
        await storage.close()


@pytest.mark.parametrize("storage, recorded", [(None, True), (False, False)])
async def test_storage_means_the_same_to_run_and_start_run(storage, recorded):
    result = await flowforge.run(DOC, storage=storage)
    handle = await flowforge.start_run(DOC, {}, storage=storage)
    started = await handle.wait()
    assert result.status == started.status == "succeeded"
    assert (await _stored(result.run_id) is not None) is recorded
    assert (await _stored(started.run_id) is not None) is recorded


async def test_start_run_with_a_url_records_there(tmp_path):
    url = f"sqlite:///{tmp_path / 'other.db'}"
    handle = await flowforge.start_run(DOC, {}, storage=url)
    result = await handle.wait()
    storage = storage_from_url(url)
    await storage.open()
    try:
        assert (await storage.get_run(result.run_id))["status"] == "succeeded"
    finally:
        await storage.close()


async def test_run_sync_inside_a_running_loop_says_to_await_run():
    with pytest.raises(RuntimeError, match=r"use `await flowforge.run\(workflow"):
        flowforge.run_sync(DOC)


def test_run_sync_without_a_loop_runs():
    assert flowforge.run_sync(DOC, storage=False).results == {"a": {"v": 1}}
