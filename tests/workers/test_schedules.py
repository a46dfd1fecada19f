"""Schedules: a trigger's firing starts exactly one run however many schedulers
look at once; a firing older than the grace is skipped; a scheduled run runs on
the pool as its owner; `flowforge schedules list` shows them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from flowforge.errors import ValidationFailed
from flowforge.service.loading import load
from flowforge.service.schedules import GRACE, due_time, fire_due
from flowforge.service.users import create_user
from flowforge.storage import storage_from_url
from tests.workers.conftest import ROOT

SEVEN = datetime(2026, 11, 23, 7, 0, tzinfo=timezone.utc).timestamp()


def scheduled(cron: str = "0 7 * * *", **trigger) -> dict:
    return {"id": "daily", "inputs": {"city": {"type": "string"}},
            "triggers": [{"cron": cron, "inputs": {"city": "Rome"}, **trigger}],
            "blocks": [{"id": "a", "type": "set", "with": {"city": "{{input.city}}"}}]}


@pytest.fixture
async def stored(tmp_path):
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    await storage.open()
    user, _ = await create_user(storage, "ana", "user")
    await storage.save_workflow(user["user_id"], "daily", scheduled())
    yield storage, user
    await storage.close()


async def test_a_firing_starts_one_run_with_two_schedulers_at_once(stored):
    storage, user = stored
    started: list[tuple[str, dict]] = []

    async def start(storage, row, trigger, run_id):
        started.append((run_id, trigger.inputs))

    now = SEVEN + 5
    first, second = await asyncio.gather(fire_due(storage, now=now, start=start),
                                         fire_due(storage, now=now, start=start))
    assert len(first) + len(second) == 1 and started[0][1] == {"city": "Rome"}
    assert await fire_due(storage, now=now + 30, start=start) == []      # same firing
    assert len(await fire_due(storage, now=SEVEN + 86_400 + 1, start=start)) == 1   # next day
    assert await fire_due(storage, now=SEVEN + 86_400 * 2 + GRACE + 1, start=start) == []


async def test_zones_name_the_local_time():
    paris_seven = datetime(2026, 11, 23, 6, 0, tzinfo=timezone.utc).timestamp()  # UTC+1
    assert due_time("0 7 * * *", "Europe/Paris", paris_seven + 10) == paris_seven
    assert due_time("0 7 * * *", "UTC", SEVEN) == SEVEN


def test_bad_triggers_are_found_by_validate():
    with pytest.raises(ValidationFailed) as caught:
        load(scheduled(cron="0 7 * *", timezone="Mars/Base"))
    found = [str(p) for p in caught.value.problems]
    assert any(p.startswith("triggers[0].cron: ") and "five-field" in p for p in found)
    assert any(p.startswith("triggers[0].timezone: ") and "Mars/Base" in p for p in found)
    bad_inputs = scheduled()
    bad_inputs["triggers"][0]["inputs"] = {"town": "Rome"}
    with pytest.raises(ValidationFailed) as caught:
        load(bad_inputs)
    assert [str(p) for p in caught.value.problems][0].startswith("triggers[0].inputs: ")


async def test_a_scheduled_run_runs_on_the_pool_as_its_owner(pool, tmp_path):
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        user, _ = await create_user(storage, "ana", "user")
        await storage.save_workflow(user["user_id"], "daily", scheduled())
        pool.start()
        [run_id] = await fire_due(storage, now=SEVEN + 1)
        for _ in range(600):
            row = await storage.get_run(run_id)
            if row["status"] in ("succeeded", "failed"):
                break
            await asyncio.sleep(0.05)
        assert row["status"] == "succeeded" and row["user_id"] == user["user_id"]
        assert row["outputs"] == {"a": {"city": "Rome"}}
    finally:
        await storage.close()
    listed = subprocess.run([sys.executable, "-m", "flowforge.cli.main", "schedules", "list",
                             "--db", pool.database], cwd=ROOT, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "daily[0]  0 7 * * * (UTC)  next " in listed.stdout
    assert f"run {run_id}" in listed.stdout
