"""Resuming is safe (issues 15 and 17): a run another live process is running
is refused (its lease), a run whose process was killed resumes without running
again what succeeded, the cut block's start is closed by a terminal event,
`--import` brings the run's functions, and a run that succeeded is left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")

FUNCTIONS = '''
import os
import flowforge

@flowforge.function("note")
def note(name: str) -> dict:
    with open(os.environ["FF_SIDE_EFFECTS"], "a") as log:
        log.write(name + "\\n")
    return {"name": name}

@flowforge.function("slow_note")
async def slow_note(name: str) -> dict:
    import asyncio
    note(name)
    await asyncio.sleep(float(os.environ.get("FF_SLOW", "60")))
    return {"name": name}
'''

WORKFLOW = """id: leased
blocks:
  - {id: first, type: function, with: {function: note, args: {name: first}}}
  - {id: slow, type: function, after: [first], with: {function: slow_note, args: {name: slow}}}
  - {id: last, type: function, after: [slow], with: {function: note, args: {name: last}}}
"""


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([FLOWFORGE, *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_resume_is_refused_while_the_run_lives_and_safe_after_it_dies(tmp_path):
    (tmp_path / "functions.py").write_text(FUNCTIONS)
    (tmp_path / "leased.yaml").write_text(WORKFLOW)
    effects = tmp_path / "effects.log"
    env = {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}",
           "FF_SIDE_EFFECTS": str(effects)}
    first = subprocess.Popen([FLOWFORGE, "run", str(tmp_path / "leased.yaml"), "--quiet",
                              "--import", str(tmp_path / "functions.py")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "slow" not in (effects.read_text() if effects.exists() else ""):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        run_id = json.loads(_cli("runs", "list", "--json", env=env).stdout)[0]["run_id"]
        busy = _cli("runs", "resume", run_id, "--import", str(tmp_path / "functions.py"),
                    env=env)
        assert busy.returncode == 2, busy.stderr
        assert "being run by another live process" in busy.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)                  # the machine "crashes"
        first.wait()
    assert effects.read_text().split() == ["first", "slow"]

    fast = {**env, "FF_SLOW": "0"}
    without_import = _cli("runs", "resume", run_id, env=fast)
    assert without_import.returncode == 1                    # its functions are unknown
    resumed = _cli("runs", "resume", run_id, "--json", "--import",
                   str(tmp_path / "functions.py"), env=fast)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "succeeded"
    # `first` succeeded before the crash and did not run again; `slow` was cut and ran again.
    assert effects.read_text().split().count("first") == 1
    assert effects.read_text().split()[-2:] == ["slow", "last"]

    shown = json.loads(_cli("runs", "show", run_id, "--json", env=env).stdout)
    types = [(e["type"], e.get("block_id")) for e in shown["events"]]
    first_start = types.index(("block_started", "slow"))
    assert ("block_cancelled", "slow") in types[first_start:]     # the cut start is closed
    seqs = [e["seq"] for e in shown["events"]]
    assert seqs == sorted(set(seqs))
    first_row = next(b for b in shown["blocks"] if b["block_id"] == "first")
    assert first_row["finished_at"] < shown["blocks"][-1]["finished_at"]
    assert shown["lease_owner"] is None

    again = _cli("runs", "resume", run_id, env=fast)
    assert again.returncode == 2 and "already succeeded" in again.stderr
    after = json.loads(_cli("runs", "show", run_id, "--json", env=env).stdout)
    assert len(after["events"]) == len(shown["events"])          # nothing changed


def test_runs_list_tells_a_cut_off_run_from_a_running_one(tmp_path):
    (tmp_path / "functions.py").write_text(FUNCTIONS)
    (tmp_path / "leased.yaml").write_text(WORKFLOW)
    env = {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}",
           "FF_SIDE_EFFECTS": str(tmp_path / "effects.log"), "COLUMNS": "200"}
    first = subprocess.Popen([FLOWFORGE, "run", str(tmp_path / "leased.yaml"), "--quiet",
                              "--import", str(tmp_path / "functions.py")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    effects = tmp_path / "effects.log"
    try:
        deadline = time.monotonic() + 60
        while "slow" not in (effects.read_text() if effects.exists() else ""):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert "cut off" not in _cli("runs", "list", env=env).stdout
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert "cut off (runs resume)" in _cli("runs", "list", env=env).stdout


FLAKY = '''

@flowforge.function("flaky_note")
def flaky_note(name: str) -> dict:
    seen = open(os.environ["FF_SIDE_EFFECTS"]).read().split() if os.path.exists(
        os.environ["FF_SIDE_EFFECTS"]) else []
    note(name)
    if name not in seen:
        raise RuntimeError("fails the first time")
    return {"name": name}
'''


def test_a_cut_off_run_keeps_its_failures_and_a_failed_run_tries_them_again(tmp_path):
    (tmp_path / "functions.py").write_text(FUNCTIONS + FLAKY)
    (tmp_path / "leased.yaml").write_text(
        WORKFLOW + "  - {id: flaky, type: function, with: {function: flaky_note, "
                   "args: {name: flaky}}}\n")
    effects = tmp_path / "effects.log"
    env = {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}",
           "FF_SIDE_EFFECTS": str(effects)}
    functions = ["--import", str(tmp_path / "functions.py")]
    first = subprocess.Popen([FLOWFORGE, "run", str(tmp_path / "leased.yaml"), "--quiet",
                              *functions], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:                   # `slow` runs and `flaky`'s failure is stored
            assert first.poll() is None and time.monotonic() < deadline
            listed = json.loads(_cli("runs", "list", "--json", env=env).stdout or "[]")
            if listed and "slow" in effects.read_text():
                shown = json.loads(_cli("runs", "show", listed[0]["run_id"], "--json",
                                        env=env).stdout)
                if any(b["block_id"] == "flaky" and b["status"] == "failed"
                       for b in shown["blocks"]):
                    break
            time.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)                  # the machine "crashes"
        first.wait()
    run_id = listed[0]["run_id"]
    fast = {**env, "FF_SLOW": "0"}
    # Going on after the crash: the failure stays a failure (not tried again
    # behind the user's back); the other branch finishes; the run fails.
    resumed = _cli("runs", "resume", run_id, "--json", *functions, env=fast)
    assert resumed.returncode == 1, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "failed"
    assert "fails the first time" in result["blocks"]["flaky"]["error"]
    assert {b: r["status"] for b, r in result["blocks"].items()} == {
        "first": "succeeded", "slow": "succeeded", "last": "succeeded", "flaky": "failed"}
    assert sorted(effects.read_text().split()) == ["first", "flaky", "last", "slow", "slow"]
    # Resuming the failed run tries again what failed it, and only that.
    again = _cli("runs", "resume", run_id, "--json", *functions, env=fast)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "succeeded"
    assert sorted(effects.read_text().split()) == ["first", "flaky", "flaky", "last", "slow",
                                                   "slow"]
