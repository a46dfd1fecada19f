"""End to end against a real OTLP receiver: Arize Phoenix (installed by
`make install` into .venv-phoenix), started here on loopback ports and
stopped by PID.  A workflow run by the command line with only the standard
OTEL_EXPORTER_OTLP_ENDPOINT set is read back from Phoenix's API as one trace
whose id is the one in the run's record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from flowforge.tls import verified_context
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"
FLOWFORGE = str(Path(sys.executable).parent / "flowforge")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    assert PHOENIX.exists(), "Phoenix is missing: `make install` installs it (.venv-phoenix)"
    folder = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()),
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_WORKING_DIR": str(folder),
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = open(folder / "phoenix.log", "w")
    process = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (folder / "phoenix.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/healthz", timeout=2, verify=verified_context()).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "Phoenix did not start within 120 s"
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def test_a_run_is_one_trace_in_phoenix(phoenix, tmp_path):
    workflow = tmp_path / "traced.yaml"
    workflow.write_text(
        "id: traced\nblocks:\n"
        "  - {id: first, type: set, with: {v: 1}}\n"
        "  - id: each\n    type: loop\n    with: {times: 2}\n    blocks:\n"
        "      - {id: inner, type: set, with: {i: '{{loop.index}}'}}\n"
        "  - {id: last, type: set, with: {w: '{{first.v}}'}, after: [each]}\n")
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
           "OTEL_SERVICE_NAME": "flowforge-e2e",
           "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}"}
    ran = subprocess.run([FLOWFORGE, "run", str(workflow), "--json"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    shown = subprocess.run([FLOWFORGE, "runs", "show", run_id, "--json"], env=env,
                           capture_output=True, text=True, timeout=60)
    trace_id = json.loads(shown.stdout)["trace_id"]
    assert trace_id and len(trace_id) == 32

    spans: list[dict] = []
    deadline = time.monotonic() + 30              # Phoenix writes what it got in batches
    while time.monotonic() < deadline:
        answer = httpx.get(f"{phoenix}/v1/projects/default/spans",
                           params={"limit": 1000}, timeout=10)
        assert answer.status_code == 200, answer.text
        spans = [s for s in answer.json()["data"] if s["context"]["trace_id"] == trace_id]
        if len(spans) >= 6:
            break
        time.sleep(0.5)
    by_id = {s["context"]["span_id"]: s for s in spans}
    parent = {s["name"]: by_id[s["parent_id"]]["name"] if s["parent_id"] else None
              for s in spans if s["name"] != "flowforge.block inner"}
    assert parent == {"flowforge.run traced": None,
                      "flowforge.block first": "flowforge.run traced",
                      "flowforge.block each": "flowforge.run traced",
                      "flowforge.block last": "flowforge.run traced"}
    inner = [s for s in spans if s["name"] == "flowforge.block inner"]
    assert len(inner) == 2
    assert {by_id[s["parent_id"]]["name"] for s in inner} == {"flowforge.block each"}
    assert {s["attributes"]["flowforge.run_id"] for s in spans} == {run_id}
