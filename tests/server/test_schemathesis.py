"""The API against a schema-driven fuzzer (issue 16): schemathesis reads
/openapi.json and sends generated requests to every operation of a real
`flowforge serve` on loopback (an admin key, a scripted model so builds are
fast) with every check on (issue 23: a 405 the document does not declare, a
GET on a POST-only route answered by the web app, valid data refused, a
required body not required): no request may get a 5xx, every status code must
be one the document declares, and what `schemathesis.toml` beside this file
says about 422.  Seeded and bounded per operation; `bench/fuzz_server.py`
runs it longer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.server.conftest import serve_process

BIN = Path(sys.executable).parent
CONFIG = Path(__file__).with_name("schemathesis.toml")


def serve(folder: Path) -> tuple[subprocess.Popen, str, str, dict]:
    """A fresh server with one admin: (process, base URL, admin key, env)."""
    env = {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{folder / 'db.sqlite'}",
           "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{folder / 'kb.sqlite'}",
           "FLOWFORGE_SECRET_KEY_FILE": str(folder / "secret.key")}
    created = subprocess.run([str(BIN / "flowforge"), "users", "create", "root", "--admin"],
                             env=env, capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    process, url = serve_process([str(BIN / "flowforge"), "serve", "--log-level", "warning",
                                  "--model", "scripted/echo"], env)
    return process, url, key, env


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def schemathesis(url: str, key: str, examples: int, seed: int, timeout: float,
                 cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`st run` with every check (its cache folder goes to `cwd`, not the checkout)."""
    return subprocess.run(
        [str(BIN / "st"), "--config-file", str(CONFIG), "run", f"{url}/openapi.json",
         "--checks", "all",
         "--max-examples", str(examples), "--seed", str(seed), "--workers", "1",
         "--phases", "examples,coverage,fuzzing", "--request-timeout", "30",
         "--header", f"Authorization: Bearer {key}"],
        capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_no_server_error_and_no_undocumented_status(tmp_path):
    process, url, key, _ = serve(tmp_path)
    try:
        result = schemathesis(url, key, examples=5, seed=1, timeout=600, cwd=tmp_path)
    finally:
        stop(process)
    summary = result.stdout[-6000:]
    assert "generated" in result.stdout, summary          # it did send requests
    assert result.returncode == 0, summary
