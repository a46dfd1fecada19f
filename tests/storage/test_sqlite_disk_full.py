"""SQLite on a disk that fills up in the middle of a `flowforge run` (issue 24),
on a real small disk (a tmpfs this test mounts): the run pauses - no block
starts before what it read is stored - and goes on once space is freed, with
every event stored once, in order; a disk that stays full cuts the run off
with exit 1, a one-line error and the result still printed, and `runs resume`
finishes it in order.  A database on a read-only disk still shows its runs."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from flowforge.storage import storage_from_url
from tests.storage.outage import FLOWFORGE, Chain, check_record, finish


@pytest.fixture
def disk(tmp_path):
    """A 4 MiB tmpfs mounted at tmp_path/disk (needs root, as the PostgreSQL
    tests do), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small disk here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> Path:
    """Fill the disk holding `folder` to the last byte; the filler file."""
    filler = folder / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        try:
            while True:
                out.write(b"\0" * 512)
        except OSError:
            pass
    return filler


async def _stored(url: str, run_id: str) -> tuple[dict, list[dict]]:
    storage = storage_from_url(url)
    await storage.open()
    try:
        return await storage.get_run(run_id), await storage.get_events(run_id)
    finally:
        await storage.close()


def test_a_run_pauses_while_the_disk_is_full_and_goes_on_once_space_is_freed(disk, tmp_path):
    database = f"sqlite:///{disk / 'runs.db'}"
    chain = Chain(tmp_path, database, count=6, seconds=0.4, hold={"s2": 3})
    chain.env["FLOWFORGE_LEASE_SECONDS"] = "3"     # renewed every second: into the full disk
    process = chain.start()
    try:
        chain.wait_for("start", "s2")
        filler = fill(disk)
        full = time.time()
        chain.wait_for("end", "s2")             # its success meets the full disk
        time.sleep(1)
        filler.unlink()
        freed = time.time()
        code, result, err = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert result["status"] == "succeeded"
    row, events = asyncio.run(_stored(database, result["run_id"]))
    assert row["status"] == "succeeded"
    check_record(events, chain)
    assert [e["type"] for e in events].count("run_finished") == 1
    for n in range(6):
        assert [e["type"] for e in events if e.get("block_id") == f"s{n}"] == \
            ["block_started", "block_succeeded"]
    starts = {name: at for kind, name, at in chain.lines() if kind == "start"}
    assert [kind for kind, _, _ in chain.lines()].count("start") == 6
    chain.held_past("s2", full, "the disk was full")
    assert starts["s3"] > freed, (starts, freed)   # s3 waited for s2's success to be stored


def test_a_disk_that_stays_full_cuts_the_run_off_and_resume_finishes_it(disk, tmp_path):
    database = f"sqlite:///{disk / 'runs.db'}"
    chain = Chain(tmp_path, database, count=5, seconds=0.4, retry=1, hold={"s1": 3})
    process = chain.start()
    try:
        chain.wait_for("start", "s1")
        filler = fill(disk)
        full = time.time()
        code, result, err = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert result is not None and result["status"] == "failed"
    run_id = result["run_id"]
    error = result["events"][-1]["error"]
    assert error.startswith("cut off: the run's database was unreachable for 1 s")
    assert "full" in error and f"flowforge runs resume {run_id}" in error
    assert f"error: {error}" in " ".join(err.split()), err
    assert not [name for kind, name, _ in chain.lines() if kind == "start" and name >= "s2"]
    chain.held_past("s1", full, "the disk was full")

    filler.unlink()
    row, events = asyncio.run(_stored(database, run_id))
    assert row["status"] == "running"
    check_record(events, chain)
    assert not [e for e in events if e["type"] == "run_finished"]
    resumed = chain.resume(run_id)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    row, events = asyncio.run(_stored(database, run_id))
    assert row["status"] == "succeeded"
    check_record(events, chain)
    assert [e["type"] for e in events].count("run_finished") == 1


def test_runs_list_and_show_read_a_database_on_a_read_only_disk(disk, tmp_path):
    database = f"sqlite:///{disk / 'runs.db'}"
    chain = Chain(tmp_path, database, count=2, seconds=0.01)
    code, result, err = finish(chain.start())
    assert code == 0, err
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    listed = subprocess.run([FLOWFORGE, "runs", "list", "--json", "--db", database],
                            capture_output=True, text=True, env=chain.env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [row["run_id"] for row in json.loads(listed.stdout)] == [result["run_id"]]
    shown = subprocess.run([FLOWFORGE, "runs", "show", result["run_id"], "--json", "--db",
                            database], capture_output=True, text=True, env=chain.env,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "succeeded"
    assert os.path.exists(disk / "runs.db")


def test_a_database_that_cannot_be_made_on_a_full_disk_says_the_disk_is_full(disk, tmp_path):
    """Not "read-only and lacks 15 schema steps": the disk is full, and the fix
    is room there or another file."""
    filler = fill(disk)
    chain = Chain(tmp_path, f"sqlite:///{disk / 'runs.db'}", count=1, seconds=0.01)
    code, _, err = finish(chain.start())
    filler.unlink()
    message = " ".join(err.split())
    assert code != 0 and "Traceback" not in err, err
    assert f"cannot open the database {disk / 'runs.db'}: its disk is full" in message, message
    assert "read-only" not in message and "FLOWFORGE_DATABASE_URL" in message
