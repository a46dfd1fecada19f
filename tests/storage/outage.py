"""What the store-outage tests share: a chain of function blocks that log their
side effects, the `flowforge run` process that runs it, and the checks every
stored record must pass whatever happened to the database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")

FUNCTIONS = '''
import asyncio, os, time
import flowforge

@flowforge.function("outage_step")
async def outage_step(name: str, seconds: float) -> dict:
    with open(os.environ["FF_EFFECTS"], "a") as log:
        log.write(f"start {name} {time.time()}\\n")
    await asyncio.sleep(seconds)
    with open(os.environ["FF_EFFECTS"], "a") as log:
        log.write(f"end {name} {time.time()}\\n")
    return {"name": name}
'''


def chain_yaml(count: int, seconds: float, hold: dict[str, float] | None = None) -> str:
    lines = ["id: outage", "blocks:"]
    for n in range(count):
        after = f", after: [s{n - 1}]" if n else ""
        took = (hold or {}).get(f"s{n}", seconds)
        lines.append(f"  - {{id: s{n}, type: function{after}, with: {{function: outage_step, "
                     f"args: {{name: s{n}, seconds: {took}}}}}}}")
    return "\n".join(lines) + "\n"


class Chain:
    """A chain workflow, its functions and its side-effect log in `folder`.

    Each block sleeps `seconds`, or its own time in `hold`: a test that breaks
    the database once a block started holds that block long enough (3 s) for
    the break to land before it ends, even on a loaded machine where stopping
    PostgreSQL takes a second."""

    def __init__(self, folder: Path, database: str, count: int = 6, seconds: float = 0.5,
                 retry: float | None = None, hold: dict[str, float] | None = None) -> None:
        self.folder, self.database, self.count = folder, database, count
        (folder / "functions.py").write_text(FUNCTIONS)
        (folder / "chain.yaml").write_text(chain_yaml(count, seconds, hold))
        self.effects = folder / "effects.log"
        self.env = {**os.environ, "FF_EFFECTS": str(self.effects),
                    "FLOWFORGE_DATABASE_URL": database}
        if retry is not None:
            self.env["FLOWFORGE_STORE_RETRY_SECONDS"] = str(retry)

    def start(self) -> subprocess.Popen:
        return subprocess.Popen([FLOWFORGE, "run", str(self.folder / "chain.yaml"), "--json",
                                 "--import", str(self.folder / "functions.py")],
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def resume(self, run_id: str) -> subprocess.CompletedProcess:
        return subprocess.run([FLOWFORGE, "runs", "resume", run_id, "--json", "--import",
                               str(self.folder / "functions.py")], env=self.env,
                              capture_output=True, text=True, timeout=120)

    def lines(self) -> list[tuple[str, str, float]]:
        if not self.effects.exists():
            return []
        return [(kind, name, float(at)) for kind, name, at in
                (line.split() for line in self.effects.read_text().splitlines())]

    def held_past(self, block: str, moment: float, what: str) -> None:
        """The premise of a test that breaks the database while `block` runs:
        it did not end before `moment`, when the break had landed (a block cut
        off never ends, which also holds)."""
        early = [at for kind, name, at in self.lines()
                 if (kind, name) == ("end", block) and at <= moment]
        assert not early, f"{block} ended before {what}: hold it longer"

    def wait_for(self, kind: str, name: str, timeout: float = 60) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for seen, block, at in self.lines():
                if (seen, block) == (kind, name):
                    return at
            time.sleep(0.02)
        raise AssertionError(f"no '{kind} {name}' in {timeout} s: {self.lines()}")


def finish(process: subprocess.Popen, timeout: float = 120) -> tuple[int, dict | None, str]:
    """Exit code, the printed RunResult (None if none), stderr."""
    out, err = process.communicate(timeout=timeout)
    try:
        result = json.loads(out) if out.strip() else None
    except json.JSONDecodeError:
        raise AssertionError(f"--json printed something else: {out[:500]!r}; {err[-2000:]}")
    return process.returncode, result, err


def check_record(events: list[dict[str, Any]], chain: Chain) -> None:
    """What must hold of any stored record: seqs 1..n with no gap or repeat, at
    most one `run_finished` and nothing after it, and no block started before
    the stored success of the block it follows; no stored success ran again."""
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(events) + 1)), f"gap or repeat: {seqs}"
    finished = [e for e in events if e["type"] == "run_finished"]
    assert len(finished) <= 1, finished
    if finished:
        assert events[-1]["type"] == "run_finished", events[-3:]
    succeeded = {e["block_id"]: e for e in events
                 if e["type"] == "block_succeeded" and not e.get("resumed")}
    for event in events:
        if event["type"] == "block_started":
            n = int(event["block_id"][1:])
            if n:
                before = succeeded.get(f"s{n - 1}")
                assert before is not None and before["seq"] < event["seq"], \
                    f"s{n} started before s{n - 1}'s success was stored: {events}"
    lines = chain.lines()
    for name, event in succeeded.items():
        again = [at for kind, block, at in lines
                 if kind == "start" and block == name and at > event["time"]]
        assert not again, f"{name} ran again after its success was stored"
    for kind, block, at in lines:      # every start after its predecessor's stored success
        n = int(block[1:])
        if kind == "start" and n:
            before = succeeded.get(f"s{n - 1}")
            assert before is not None and at >= before["time"], (block, at, before)
