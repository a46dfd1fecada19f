"""PostgreSQL stopped the hard way (`pg_ctl -m immediate stop`) in the middle of
a `flowforge run` (issue 24): the run pauses - no block starts before what it
read is stored - and carries on once the server is back, with every event
stored once, in order; a server that stays away cuts the run off with exit 1,
a one-line error and the result still printed, and `runs resume` finishes it
without running a stored success again or out of order."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time

import pytest

from flowforge.storage import storage_from_url, testing
from tests.storage.outage import FLOWFORGE, Chain, check_record, finish


@pytest.fixture(scope="module")
def server():
    """A server of this module's own, the tests crash it: durable (fsync and
    synchronous commit on, as in production), else a crash loses commits."""
    started = testing.start(durable=True)
    holder = {"server": started}
    yield holder
    testing.stop(holder["server"])


async def _stored(url: str, run_id: str) -> tuple[dict, list[dict]]:
    storage = storage_from_url(url)
    await storage.open()
    try:
        return await storage.get_run(run_id), await storage.get_events(run_id)
    finally:
        await storage.close()


def test_a_run_pauses_while_postgres_is_down_and_goes_on_once_it_is_back(server, tmp_path):
    chain = Chain(tmp_path, server["server"].url, count=6, seconds=0.5, hold={"s2": 3})
    process = chain.start()
    try:
        chain.wait_for("start", "s2")
        testing.crash(server["server"])
        down = time.time()
        chain.wait_for("end", "s2")             # its success cannot be stored now
        time.sleep(1)
        # the server accepts again somewhere inside restart(): the run may go on
        # before it returns, never before it began
        restarting = time.time()
        server["server"] = testing.restart(server["server"])
        code, result, err = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert result["status"] == "succeeded"
    row, events = asyncio.run(_stored(server["server"].url, result["run_id"]))
    assert row["status"] == "succeeded"
    check_record(events, chain)
    assert [e["type"] for e in events].count("run_finished") == 1
    for n in range(6):          # every block started and succeeded exactly once
        assert [(e["type"]) for e in events if e.get("block_id") == f"s{n}"] == \
            ["block_started", "block_succeeded"]
    starts = {name: at for kind, name, at in chain.lines() if kind == "start"}
    assert [kind for kind, _, _ in chain.lines()].count("start") == 6
    # s2 ended while the server was down: s3 waited for its success to be stored
    chain.held_past("s2", down, "the server was down")
    assert starts["s3"] > restarting, (starts, down, restarting)


def test_a_long_outage_cuts_the_run_off_and_resume_finishes_it_in_order(server, tmp_path):
    chain = Chain(tmp_path, server["server"].url, count=5, seconds=0.4, retry=1,
                  hold={"s1": 3})
    process = chain.start()
    restarted = threading.Event()
    try:
        chain.wait_for("start", "s1")
        testing.crash(server["server"])
        down, started = time.time(), time.monotonic()
        code, result, err = finish(process)
        elapsed = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
        server["server"] = testing.restart(server["server"])
        restarted.set()
    assert code == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert elapsed < 30, elapsed                # 1 s of retries plus one last try
    chain.held_past("s1", down, "the server was down")
    assert result is not None and result["status"] == "failed"
    run_id = result["run_id"]
    error = result["events"][-1]["error"]
    assert result["events"][-1]["status"] == "failed"
    assert error.startswith("cut off: the run's database was unreachable for 1 s")
    assert f"flowforge runs resume {run_id}" in error
    assert f"error: {error}" in " ".join(err.split()), err    # one line, said on stderr too
    lines = chain.lines()
    assert not [name for kind, name, _ in lines if kind == "start" and name in ("s2", "s3")], \
        f"a block started after its predecessor's success could not be stored: {lines}"

    row, events = asyncio.run(_stored(server["server"].url, run_id))
    assert row["status"] == "running"           # cut off: left for a resume
    check_record(events, chain)
    assert not [e for e in events if e["type"] == "run_finished"]

    resumed = chain.resume(run_id)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    row, events = asyncio.run(_stored(server["server"].url, run_id))
    assert row["status"] == "succeeded"
    check_record(events, chain)
    assert [e["type"] for e in events].count("run_finished") == 1
    ends = [name for kind, name, _ in chain.lines() if kind == "end"]
    assert sorted(set(ends)) == [f"s{n}" for n in range(5)]


def test_runs_list_and_show_read_a_read_only_postgres_database(postgres_schema_url, tmp_path):
    chain = Chain(tmp_path, postgres_schema_url, count=2, seconds=0.01)
    code, result, err = finish(chain.start())
    assert code == 0, err
    read_only = postgres_schema_url + "%20-cdefault_transaction_read_only%3Don"
    env = {**chain.env, "FLOWFORGE_DATABASE_URL": read_only}
    listed = subprocess.run([FLOWFORGE, "runs", "list", "--json"], capture_output=True,
                            text=True, env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [row["run_id"] for row in json.loads(listed.stdout)] == [result["run_id"]]
    shown = subprocess.run([FLOWFORGE, "runs", "show", result["run_id"], "--json"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "succeeded"
    # and it is read-only indeed: a new run is refused in one line
    refused = subprocess.run([FLOWFORGE, "run", str(tmp_path / "chain.yaml"), "--import",
                              str(tmp_path / "functions.py"), "--quiet"], capture_output=True,
                             text=True, env=env, timeout=60)
    assert refused.returncode == 1, refused.stderr
    assert "read-only" in refused.stderr and "Traceback" not in refused.stderr
