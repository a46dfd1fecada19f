"""The forked `flowforge` (tests/forked_cli.py) that the guides' and the
README's shell blocks run is the command itself: the same output, the same
exit status, and bash's signals reach it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _both(script: str, folder: Path, flowforge_bin: Path) -> list[subprocess.CompletedProcess]:
    """The script with the installed command, then with the forked one."""
    runs = []
    for first in (Path(sys.executable).parent, flowforge_bin):
        env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT / "src"),
               "PATH": f"{first}:{os.environ['PATH']}",
               "FLOWFORGE_DATABASE_URL": f"sqlite:///{folder / 'flowforge.db'}"}
        runs.append(subprocess.run(["bash", "-c", script], cwd=folder, env=env,
                                   capture_output=True, text=True, timeout=60))
    return runs


def test_the_forked_command_prints_and_exits_as_the_installed_one(tmp_path, flowforge_bin):
    (tmp_path / "typo.yaml").write_text("version: 1\nid: t\nblocks:\n"
                                        "  - {id: a, type: set, retyr: 2, with: {v: 1}}\n")
    script = (f"flowforge validate {ROOT}/examples/branch_join.yaml; echo rc=$?\n"
              "flowforge validate typo.yaml; echo rc=$?\n"
              "flowforge runs show 0123abcd; echo rc=$?\n"
              "echo '{\"amount\": 5}' > in.json\n"
              f"flowforge run {ROOT}/examples/branch_join.yaml --inputs-file in.json --json "
              "--no-store | grep -o '\"status\": \"[a-z]*\"' | head -1")
    real, forked = _both(script, tmp_path, flowforge_bin)
    assert forked.stdout == real.stdout and forked.stderr == real.stderr
    assert "rc=0" in real.stdout and "rc=2" in real.stdout and "rc=1" in real.stdout
    assert '"status": "succeeded"' in real.stdout


def test_bash_signals_reach_the_forked_command_as_the_installed_one(tmp_path, flowforge_bin):
    """`kill $!` (a recipe stops its server so) ends the command; SIGINT, which
    bash has a background command ignore, does not."""
    (tmp_path / "slow.yaml").write_text("version: 1\nid: slow\nblocks:\n"
                                        "  - {id: w, type: wait, with: {seconds: 60}}\n")
    started = time.monotonic()
    real, forked = _both("flowforge run slow.yaml --no-store & sleep 1.5; kill -INT $!; "
                         "sleep 1.5; kill $!; wait $! || echo rc=$?",
                         tmp_path, flowforge_bin)
    assert time.monotonic() - started < 30
    assert forked.stdout == real.stdout
    assert real.stdout.strip().endswith("rc=143"), real    # SIGTERM ended it; SIGINT did not
