"""`bench/suite.py`, the tool the suite's timings are measured with: its plugin
logs a real pytest run (collection, each test, the end) and its report adds
that log up per worker and per test file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.script_modules import ROOT, load_module


def test_the_plugin_logs_a_pytest_run_and_the_report_adds_it_up(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_two.py").write_text("import time\n\ndef test_a():\n    time.sleep(0.2)\n\n"
                                       "def test_b():\n    pass\n")
    (tests / "test_one.py").write_text("def test_c():\n    sum(range(10_000_000))\n")
    log = tmp_path / "suite.jsonl"
    env = {**os.environ, "FLOWFORGE_SUITE_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")])}
    ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite", "-q",
                          "-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
                          "-p", "no:schemathesis", "--rootdir", str(tmp_path), str(tests)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [row["phase"] for row in rows[:2]] == ["start", "collected"]
    assert rows[-1]["phase"] == "finish"
    measured = {row["id"].rsplit("::", 1)[1]: row for row in rows if row["phase"] == "test"}
    assert set(measured) == {"test_a", "test_b", "test_c"}
    assert measured["test_a"]["took"] >= 0.2 > measured["test_a"]["cpu"]   # a sleep: time
    assert measured["test_c"]["cpu"] > 0.05 > measured["test_b"]["cpu"]     # a sum: CPU

    shown = load_module(ROOT / "bench" / "suite.py", "bench_suite").report(log)
    assert shown["tests"] == 3
    by_file = {Path(entry["file"]).name: entry for entry in shown["top_files_by_cpu"]}
    assert by_file["test_two.py"]["tests"] == 2 and by_file["test_one.py"]["tests"] == 1
    assert by_file["test_two.py"]["time_s"] == round(
        measured["test_a"]["took"] + measured["test_b"]["took"], 1)
    assert shown["top_files_by_cpu"][0]["file"].endswith("test_one.py")   # most CPU first

    # --save-durations' figures: each file's seconds, the longest first (the order
    # the suite's conftest hands files to its workers)
    seconds = load_module(ROOT / "bench" / "suite.py", "bench_suite").file_seconds(log)
    assert {Path(name).name: took for name, took in seconds.items()} == {
        name: entry["time_s"] for name, entry in by_file.items()}
    assert list(seconds.values()) == sorted(seconds.values(), reverse=True)
