"""The test suite as `make test` runs it, timed from the inside: when each
pytest worker finished collecting and the CPU that took, when each ended, the
run's wall and CPU, and the test files that cost the most CPU (the test
process's own and its reaped children's) - the figures of bench/RESULTS.md's
test-suite tables.  A whole run's wall moves by ±15 s on a loaded 2-core VM,
so compare trees in runs made one after the other.

    .venv/bin/python bench/suite.py                 # make test's steps, then the report
    .venv/bin/python bench/suite.py -- tests/cli    # pytest arguments after --
    .venv/bin/python bench/suite.py --log LOG       # ... and keep the log of every test
    .venv/bin/python bench/suite.py --report LOG    # the report of a log already written
    .venv/bin/python bench/suite.py --save-durations   # ... and write tests/durations.json

`tests/durations.json` holds each test file's seconds in the last such run:
the suite's conftest hands the longest files to the workers first (a file
with one 50-second test queued last was the run's tail).  Refresh it when
tests are added or made slower; a stale figure only changes the order.

The other half of this file is a pytest plugin, loaded into the controller
and every worker with `-p suite` (bench/ on PYTHONPATH), that writes one JSON
line per test and per phase to $FLOWFORGE_SUITE_LOG.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = ROOT / "tests" / "durations.json"
_LOG: Any = None


def _cpu() -> float:
    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _write(**fields: Any) -> None:
    global _LOG
    if _LOG is None:
        _LOG = open(os.environ["FLOWFORGE_SUITE_LOG"], "a", encoding="utf-8")
    fields["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    _LOG.write(json.dumps(fields) + "\n")
    _LOG.flush()


# -- the plugin ---------------------------------------------------------------------------

def pytest_sessionstart(session: Any) -> None:
    _write(phase="start", at=time.time(), cpu=_cpu())


def pytest_collection_finish(session: Any) -> None:
    _write(phase="collected", at=time.time(), cpu=_cpu())


def pytest_sessionfinish(session: Any) -> None:
    _write(phase="finish", at=time.time(), cpu=_cpu())


def _protocol_wrapper() -> Any:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
        started, cpu = time.time(), _cpu()
        yield
        _write(phase="test", id=item.nodeid, at=started, took=time.time() - started,
               cpu=_cpu() - cpu)
    return pytest_runtest_protocol


if "pytest" in sys.modules:           # loaded as a plugin: pytest is importing it
    pytest_runtest_protocol = _protocol_wrapper()


# -- the report ---------------------------------------------------------------------------

def report(log: Path, top: int = 15) -> dict[str, Any]:
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    started = min(row["at"] for row in rows if row["phase"] == "start")
    workers = sorted({row["worker"] for row in rows if row["worker"] != "controller"})

    def phase(name: str) -> dict[str, dict[str, Any]]:
        return {row["worker"]: row for row in rows if row["phase"] == name}

    collected, finished = phase("collected"), phase("finish")
    tests = [row for row in rows if row["phase"] == "test"]
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for row in tests:
        entry = files[row["id"].split("::", 1)[0]]
        entry[0] += row["cpu"]
        entry[1] += row["took"]
        entry[2] += 1
    return {
        "tests": len(tests),
        "first_test_after_s": [round(collected[w]["at"] - started, 1)
                               for w in workers if w in collected],
        "collecting_cpu_s_per_worker": [round(collected[w]["cpu"], 1)
                                        for w in workers if w in collected],
        "worker_ends_s": [round(finished[w]["at"] - started, 1)
                          for w in workers if w in finished],
        "tests_cpu_s": round(sum(row["cpu"] for row in tests)),
        "tests_time_s": round(sum(row["took"] for row in tests)),
        "top_files_by_cpu": [
            {"file": name, "cpu_s": round(cpu, 1), "time_s": round(took, 1), "tests": count}
            for name, (cpu, took, count) in sorted(files.items(), key=lambda f: -f[1][0])[:top]],
    }


def file_seconds(log: Path) -> dict[str, float]:
    """Each test file's seconds in the run logged at `log`, the longest first."""
    seconds: dict[str, float] = collections.defaultdict(float)
    for line in log.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["phase"] == "test":
            seconds[row["id"].split("::", 1)[0]] += row["took"]
    return {name: round(took, 1) for name, took in
            sorted(seconds.items(), key=lambda item: (-item[1], item[0]))}


def run(pytest_args: list[str], log: Path) -> dict[str, Any]:
    """`make test`'s steps (bytecode, the rewritten-assert cache, the suite) with the
    plugin loaded; the run's wall and CPU beside the report."""
    python = sys.executable
    env = {**os.environ, "FLOWFORGE_SUITE_LOG": str(log),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT / "bench"),
                                                       os.environ.get("PYTHONPATH")]))}
    subprocess.run([python, "-m", "compileall", "-q", "src", "tests"], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, check=True)
    started, cpu = time.monotonic(), _cpu()
    subprocess.run([python, "scripts/warm_test_cache.py"], cwd=ROOT, env=env, check=True)
    suite = subprocess.run([python, "-m", "pytest", "-n", "auto", "--dist", "loadfile",
                            "-p", "suite", *pytest_args], cwd=ROOT, env=env)
    return {"exit": suite.returncode, "wall_s": round(time.monotonic() - started, 1),
            "cpu_s": round(_cpu() - cpu, 1), **report(log)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, metavar="LOG",
                        help="only print the report of a log an earlier run wrote")
    parser.add_argument("--log", type=Path, metavar="LOG",
                        help="keep the run's log here (one JSON line per test) for a "
                             "later --report or a closer look; by default it is thrown away")
    parser.add_argument("--save-durations", action="store_true",
                        help="write each test file's seconds to tests/durations.json, the "
                             "order the suite hands files to its workers")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args()
    if args.report:
        print(json.dumps(report(args.report), indent=1))
        return
    with tempfile.TemporaryDirectory(prefix="flowforge-suite-") as folder:
        log = args.log.resolve() if args.log else Path(folder) / "suite.jsonl"
        log.unlink(missing_ok=True)
        print(json.dumps(run(args.pytest_args, log), indent=1))
        if args.save_durations:
            DURATIONS.write_text(json.dumps(file_seconds(log), indent=0) + "\n",
                                 encoding="utf-8")


if __name__ == "__main__":
    main()
