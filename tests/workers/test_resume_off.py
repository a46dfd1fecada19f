"""Resuming off (`flowforge worker --no-resume`, `flowforge serve --no-resume`,
FLOWFORGE_RESUME_CUT_OFF=0): a run cut off by a process that died is marked
failed, naming that process and how to resume it, never left `running`; and
`flowforge runs resume` then finishes it without re-running what succeeded."""

from __future__ import annotations

import json
import subprocess
import sys

from flowforge.storage import storage_from_url
from tests.server.conftest import start_server, wait_for_status
from tests.workers.conftest import PLUGIN, ROOT
from tests.workers.test_pool import chain, cut_off_run, ended, wait_for


def _says_how(row: dict, run_id: str, pid: str) -> None:
    assert row["status"] == "failed", row
    assert f":{pid}:" in row["error"] and "is gone" in row["error"]       # which process
    assert f"flowforge runs resume {run_id}" in row["error"]               # what to do


async def test_a_worker_with_resuming_off_fails_a_cut_off_run_saying_how_to_resume(
        pool, tmp_path):
    log = tmp_path / "steps.log"
    run_id, pid = cut_off_run(pool.database, log, tmp_path, pool.env)
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        assert (await storage.get_run(run_id))["status"] == "running"
        pool.start(options=("--no-resume",))
        row = await wait_for(storage, run_id, ended, timeout=60)
        _says_how(row, run_id, pid)
        events = await storage.get_events(run_id)
        assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "failed"
        blocks = {b["block_id"]: b["status"] for b in await storage.get_blocks(run_id)}
        assert blocks["s0"] == "succeeded" and blocks["s1"] == "cancelled"
    finally:
        await storage.close()
    # what the reason says works: the run finishes, s0 not run again
    done = subprocess.run([sys.executable, "-m", "flowforge.cli.main", "runs", "resume",
                           run_id, "--import", PLUGIN, "--json"], cwd=ROOT, env=pool.env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    ends = [line.split()[1] for line in log.read_text().splitlines() if line.startswith("end")]
    assert sorted(ends) == ["0", "1", "2"]


async def test_a_server_with_resuming_off_fails_a_cut_off_run(tmp_path, monkeypatch):
    database = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("FLOWFORGE_RESUME_CUT_OFF", "0")
    from flowforge.server.settings import ServerSettings
    assert ServerSettings().resume_cut_off is False              # the variable is read
    import os
    run_id, pid = cut_off_run(database, tmp_path / "steps.log", tmp_path, dict(os.environ))
    live, stop = await start_server(database, resume_cut_off=False, resume_interval=0.2)
    try:
        row = await wait_for_status(live, run_id, "failed", "succeeded", timeout=30)
    finally:
        await stop()
    _says_how(row, run_id, pid)


def test_the_cli_options_say_what_resuming_off_does():
    for command in ("serve", "worker"):
        shown = subprocess.run([sys.executable, "-m", "flowforge.cli.main", command,
                                "--help"], cwd=ROOT, capture_output=True, text=True,
                               env={**__import__("os").environ, "COLUMNS": "200"})
        assert "--no-resume" in shown.stdout and "FLOWFORGE_RESUME_CUT_OFF" in shown.stdout


async def test_a_server_with_resuming_off_has_its_pool_runs_failed_by_any_worker(
        pool, tmp_path, monkeypatch):
    """`serve --workers celery --no-resume`: the choice travels with the run, so a
    worker that resumes by default still fails the run it finds cut off."""
    import asyncio

    from tests.workers.test_pool_approvals import pids

    monkeypatch.setenv("FLOWFORGE_QUEUE", pool.queue)
    workers = [pool.start(), pool.start()]                  # both resume by default
    for worker in workers:
        pool.wait_ready(worker)
    log = tmp_path / "steps.log"
    live, stop = await start_server(pool.database, workers="celery", resume_cut_off=False,
                                    resume_interval=0)
    try:
        async with live.client("alice") as alice:
            assert (await alice.post("/api/workflows", json=chain(3, 0.5, log))).status_code \
                == 201
            run_id = (await alice.post("/api/workflows/chain/runs", json={})).json()["run_id"]
        for _ in range(600):
            if log.exists() and 0 in pids(log):
                break
            await asyncio.sleep(0.02)
        ran = pids(log)[0]
        pool.kill(next(w for w in workers if str(w.pid) == ran))
        row = await wait_for_status(live, run_id, "failed", "succeeded", timeout=30)
    finally:
        await stop()
    _says_how(row, run_id, ran)
    assert "off where the run was queued" in row["error"]
    assert sorted(pids(log)) == [0]                       # the other worker ran nothing


async def test_a_run_queued_with_resuming_off_carries_the_choice(pool, tmp_path, monkeypatch):
    """`flowforge run --queue` (any `enqueue`) with FLOWFORGE_RESUME_CUT_OFF=0: the
    run's stored request says so, which is what every worker reads."""
    from flowforge.service.pool import enqueue

    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        monkeypatch.setenv("FLOWFORGE_RESUME_CUT_OFF", "0")
        off = await enqueue(chain(1, 0.01, tmp_path / "log"), storage=storage)
        monkeypatch.delenv("FLOWFORGE_RESUME_CUT_OFF")
        on = await enqueue(chain(1, 0.01, tmp_path / "log"), storage=storage)
        queued = {run_id: (await storage.get_events(run_id))[0] for run_id in (off, on)}
    finally:
        await storage.close()
    assert queued[off]["type"] == "run_queued" and queued[off]["resume_cut_off"] is False
    assert queued[on]["resume_cut_off"] is True
