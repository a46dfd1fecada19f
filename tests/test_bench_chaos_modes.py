"""bench/chaos.py's issue-41 modes at a tiny size, as a user runs them: the
cut streams (`--stream-cuts`: no partial answer stored, every cut retried or
failed saying so) and the runs waiting on an approval followed over SSE and
WebSocket across the decision and a server restart (`--approvals`): zero
defects.  Each bench found its bug on the code before the fix (14 partial
answers in 40 runs; 44 defects in 4 waiting runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.script_modules import ROOT


def _chaos(*options: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    ran = subprocess.run([sys.executable, str(ROOT / "bench" / "chaos.py"), *options],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return json.loads(ran.stdout.splitlines()[0])


def test_cut_streams_are_retried_or_failed_never_stored_as_the_answer():
    report = _chaos("--stream-cuts", "4", "--cut-rate", "0.6", "--parallel", "4")
    assert report["defects"] == 0, report
    for variant in ("with_fallback", "no_fallback"):
        counts = report[variant]
        assert counts["partial"] == counts["failed_other"] == counts["kept_partial"] == 0
        assert counts["whole"] + counts["failed_cut"] == 4
    cuts = report["with_fallback"]["cuts"] + report["no_fallback"]["cuts"]
    restarts = report["with_fallback"]["restarts"] + report["no_fallback"]["restarts"]
    assert cuts > 0 and 0 < restarts <= cuts          # the bench did cut, and they were seen


def test_waiting_runs_are_followed_once_each_across_the_decision_and_a_restart():
    report = _chaos("--approvals", "3", "--decide-within", "2", "--server-restarts", "1",
                    "--server-every", "1", "--timeout", "60")
    assert report["defects"] == 0, report
    assert report["runs"] == report["approved"] + report["rejected"] == 3
    assert report["latency_sse_p50_ms"] is not None or report["latency_across_p50_ms"]
