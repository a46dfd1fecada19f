"""Schedules: a trigger's firing starts exactly one run however many schedulers
look at once; a firing older than the grace is skipped; a scheduled run runs on
the pool as its owner; `flowforge schedules list` shows them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from flowforge.errors import ValidationFailed
from flowforge.service.loading import load
from flowforge.service.pool import GRACE, fire_due
from flowforge.service.pool.schedules import due_time
from flowforge.service.users import create_user
from flowforge.storage import storage_from_url
from tests.workers.conftest import ROOT

#: 07:00 UTC, a day or two ahead: after the test's workflows are saved (a trigger
#: never fires a time older than itself)
SEVEN = (datetime.now(timezone.utc) + timedelta(days=2)).replace(
    hour=7, minute=0, second=0, microsecond=0).timestamp()


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


def test_a_trigger_may_leave_out_an_optional_input():
    """`optional: true` makes an input without a default optional for a run;
    validate read it as required for a trigger's inputs (and refused the
    manual's own example)."""
    document = scheduled()
    document["inputs"]["urgent"] = {"type": "boolean", "optional": True}
    assert load(document).id == "daily"
    document["triggers"][0]["inputs"]["urgent"] = "yes"
    with pytest.raises(ValidationFailed, match=r"triggers\[0\]\.inputs: .*boolean"):
        load(document)


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


async def test_a_trigger_never_fires_a_time_before_it_existed(tmp_path):
    """Saved at 07:00:05 with `* * * * *`: the 07:00:00 firing is not its own,
    though within the grace; 07:01:00 is.  Saving an unrelated change keeps the
    trigger's age; changing the trigger makes a new one."""
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    await storage.open()
    user, _ = await create_user(storage, "ana", "user")
    owner = user["user_id"]
    fired: list[float] = []

    async def start(storage, row, trigger, run_id):
        fired.append(run_id)

    async def save(document, at):
        version = await storage.save_workflow(owner, "minutely", document)
        await storage._sql_change("UPDATE workflow_versions SET created_at = ? WHERE owner = ? "
                                  "AND workflow_id = ? AND version = ?",
                                  (at, owner, "minutely", version))

    async def fire(at):
        return len(await fire_due(storage, now=at, start=start))

    try:
        await save(scheduled(cron="* * * * *"), SEVEN + 5)
        assert await fire(SEVEN + 6) == 0                   # 07:00 is older than it
        assert await fire(SEVEN + 61) == 1                  # 07:01
        await save({**scheduled(cron="* * * * *"), "name": "renamed"}, SEVEN + 125)
        assert await fire(SEVEN + 126) == 1                 # 07:02: the trigger is 07:00:05's
        await save(scheduled(cron="* * * * *", timezone="Europe/Paris"), SEVEN + 185)
        assert await fire(SEVEN + 186) == 0                 # 07:03 is older than the new one
        assert await fire(SEVEN + 241) == 1                 # 07:04
        await save(scheduled(cron="* * * * *", timezone="Europe/Paris", enabled=False),
                   SEVEN + 290)
        await save(scheduled(cron="* * * * *", timezone="Europe/Paris"), SEVEN + 305)
        assert await fire(SEVEN + 306) == 0                 # enabled again at 07:05:05
        assert len(fired) == 3
    finally:
        await storage.close()
