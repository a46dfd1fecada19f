"""A run that kills its process is not resumed into the same death for ever
(issue 41): each resume of a run its process left `running` is counted on
its row, and once its process died twice it is failed, saying why, instead
of being resumed again.  And a run is cancelled with its server down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.server.conftest import wait_for_status

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")
DOCUMENT = {"id": "cut", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}},
                                    {"id": "b", "type": "set", "with": {"w": "{{a.v}}"}}]}


async def _cut_off_run(storage, run_id: str, user_id: str, resumes: int | None) -> None:
    """A run as a dead process leaves it: `running`, block `b` running, a
    lease nobody renews."""
    now = time.time()
    await storage.create_run({"run_id": run_id, "workflow_id": "cut", "user_id": user_id,
                              "status": "running", "inputs": {}, "created_at": now,
                              "started_at": now, "document": DOCUMENT,
                              "lease_owner": "gone-host:1:dead", "lease_expires_at": now - 1,
                              "cut_off_resumes": resumes})
    await storage.record(run_id, [
        {"seq": 1, "type": "run_started", "run_id": run_id, "time": now},
        {"seq": 2, "type": "block_started", "run_id": run_id, "time": now, "block_id": "b"}],
        [{"scope": "", "block_id": "b", "type": "set", "status": "running",
          "started_at": now}])


async def test_a_run_cut_off_once_is_resumed_and_counted(server):
    await _cut_off_run(server.storage, "died1", server.users["alice"]["user_id"], None)
    assert await server.app.state.live.resume_due() == ["died1"]
    row = await wait_for_status(server, "died1", "succeeded")
    assert row["cut_off_resumes"] == 1


async def test_a_run_whose_process_died_twice_is_failed_not_resumed(server):
    await _cut_off_run(server.storage, "died2", server.users["alice"]["user_id"], 1)
    assert await server.app.state.live.resume_due() == []
    row = await server.storage.get_run("died2")
    assert row["status"] == "failed" and row["lease_owner"] is None
    assert row["error"].startswith("its process died twice while running it; not resumed "
                                   "again: block b was running when it last died")
    assert "flowforge runs resume died2" in row["error"]
    events = await server.storage.get_events("died2")
    assert [e["type"] for e in events[-2:]] == ["block_cancelled", "run_finished"]
    assert events[-1]["status"] == "failed"
    # the next look leaves it alone: it is failed, not running
    assert await server.app.state.live.resume_due() == []


def test_runs_cancel_works_with_the_server_down(tmp_path):
    """The run's server is gone (its lease holder is a dead process of this
    host): `flowforge runs cancel` ends the run in the store at once."""
    database = tmp_path / "runs.db"
    env = {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{database}"}
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    script = f"""
import asyncio, time
from flowforge.storage import storage_from_url
async def main():
    storage = storage_from_url("sqlite:///{database}")
    await storage.open()
    now = time.time()
    await storage.create_run({{"run_id": "orphan", "workflow_id": "cut", "status": "running",
        "inputs": {{}}, "created_at": now, "started_at": now, "document": {DOCUMENT!r},
        "lease_owner": __import__("flowforge.service.cancel", fromlist=["x"]).host_name()
                       + ":{dead.pid}:abcd", "lease_expires_at": now + 600}})
    await storage.record("orphan", [{{"seq": 1, "type": "run_started", "run_id": "orphan",
        "time": now}}], [{{"scope": "", "block_id": "a", "type": "set", "status": "running",
        "started_at": now}}])
    await storage.close()
asyncio.run(main())
"""
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    started = time.monotonic()
    cancelled = subprocess.run([FLOWFORGE, "runs", "cancel", "orphan", "--wait", "30"],
                               capture_output=True, text=True, env=env, timeout=120)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert time.monotonic() - started < 25          # not after waiting out --wait
    shown = subprocess.run([FLOWFORGE, "runs", "show", "orphan", "--json", "--events"],
                           capture_output=True, text=True, env=env, timeout=120)
    detail = json.loads(shown.stdout)
    assert detail["status"] == "cancelled", detail
    assert [(b["block_id"], b["status"]) for b in detail["blocks"]] == [("a", "cancelled")]
    assert detail["events"][-1]["type"] == "run_finished"
