"""`flowforge runs approve|reject|resume-due` across processes: a run waits
(exit 3), another process decides and the run continues from its
checkpoints; what succeeded before the pause never runs again."""

from __future__ import annotations

import json
import os
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
'''

WORKFLOW = """id: refund
inputs: {amount: {type: number, default: 30}}
blocks:
  - {id: prepare, type: function, with: {function: note, args: {name: prepare}}}
  - id: ok
    type: approval
    after: [prepare]
    with: {message: "Refund {{input.amount}} EUR?", on_reject: refuse, timeout: TIMEOUT, default: approve}
  - {id: pay, type: function, after: [ok], with: {function: note, args: {name: pay}}}
  - {id: refuse, type: function, after: [ok], with: {function: note, args: {name: refuse}}}
"""


def _setup(tmp_path: Path, timeout: float = 3600) -> tuple[dict, Path]:
    (tmp_path / "fns.py").write_text(FUNCTIONS)
    (tmp_path / "refund.yaml").write_text(WORKFLOW.replace("TIMEOUT", str(timeout)))
    env = {**os.environ, "FF_SIDE_EFFECTS": str(tmp_path / "effects.log"),
           "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}"}
    return env, tmp_path / "effects.log"


def _cli(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([FLOWFORGE, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def _start(tmp_path: Path, env: dict) -> str:
    started = _cli("run", "refund.yaml", "--import", "fns.py", "--json", env=env, cwd=tmp_path)
    assert started.returncode == 3, started.stderr
    result = json.loads(started.stdout)
    assert result["status"] == "waiting" and result["blocks"]["ok"]["status"] == "waiting"
    assert result["blocks"]["pay"]["status"] == "pending"
    return result["run_id"]


def test_approve_and_reject_from_another_process(tmp_path):
    env, effects = _setup(tmp_path)
    run_id = _start(tmp_path, env)
    listed = _cli("runs", "list", "--status", "waiting", "--json", env=env, cwd=tmp_path)
    assert run_id in listed.stdout
    approved = _cli("runs", "approve", run_id[:10], "ok", "--comment", "fine", "--by", "ann",
                    "--import", "fns.py", "--json", env=env, cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    result = json.loads(approved.stdout)
    assert result["results"]["ok"]["by"] == "ann" and result["results"]["ok"]["comment"] == "fine"
    assert result["blocks"]["refuse"]["status"] == "skipped"
    assert effects.read_text().split() == ["prepare", "pay"]
    # The record shows each block once, as it ended: `pay` succeeded, and was never
    # "skipped: waiting for approval" on the way.
    shown = _cli("runs", "show", run_id, env=env, cwd=tmp_path)
    text = " ".join(shown.stdout.split())
    assert "pay (function) succeeded" in text and "waiting" not in text.split("pay (function)")[1]
    assert "refuse (function) skipped skipped: not on the chosen route" in text
    assert text.count("skipped") == 2                  # that block, and nothing else
    again = _cli("runs", "approve", run_id, "ok", env=env, cwd=tmp_path)
    assert again.returncode != 0 and "not waiting" in again.stderr

    effects.unlink()
    run_id = _start(tmp_path, env)
    rejected = _cli("runs", "reject", run_id, "ok", "-m", "too much", "--import", "fns.py",
                    env=env, cwd=tmp_path)
    assert rejected.returncode == 0, rejected.stderr
    assert effects.read_text().split() == ["prepare", "refuse"]
    wrong = _cli("runs", "approve", run_id, "nope", env=env, cwd=tmp_path)
    assert wrong.returncode != 0 and "error" in wrong.stderr


def test_runs_show_lists_the_blocks_a_waiting_run_holds_back_as_pending(tmp_path):
    env, _ = _setup(tmp_path)
    run_id = _start(tmp_path, env)
    shown = _cli("runs", "show", run_id, env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "pay pending - runs after 'ok' when the run is resumed" in text
    assert "refuse pending" in text and "skipped" not in text


def test_resume_due_takes_the_default_after_the_timeout(tmp_path):
    env, effects = _setup(tmp_path, timeout=0.5)
    run_id = _start(tmp_path, env)
    time.sleep(0.6)
    resumed = _cli("runs", "resume-due", "--import", "fns.py", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{run_id} succeeded" in resumed.stdout
    assert effects.read_text().split() == ["prepare", "pay"]
