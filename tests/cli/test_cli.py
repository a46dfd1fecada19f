"""The command line as users and scripts rely on it: exit codes, --json on
stdout only, clear errors without tracebacks, stored runs inspectable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import in_process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def flowforge(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command line, run in this process (tests/in_process.py), from the checkout."""
    return in_process.flowforge(*args, env=env, cwd=ROOT)


def test_run_json_prints_only_the_result_and_exits_0():
    proc = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "--input", "amount=1500",
                     "--input", 'customer="acme"', "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "succeeded"
    assert data["outputs"] == {"reply": {"message": "Order for acme: approved", "status": 200}}
    assert data["blocks"]["review"]["status"] == "skipped"


def test_input_values_are_json_when_they_parse_else_strings(tmp_path):
    doc = tmp_path / "echo.yaml"
    doc.write_text("id: echo\nblocks:\n  - {id: out, type: set, with: {a: '{{input.a}}', "
                   "b: '{{input.b}}', c: '{{input.c}}'}}\n")
    proc = flowforge("run", str(doc), "-i", "a=[1, 2]", "-i", "b=hello world", "-i", "c=3.5",
                     "--json", "--no-store")
    assert json.loads(proc.stdout)["results"]["out"] == {"a": [1, 2], "b": "hello world", "c": 3.5}


def test_inputs_file_is_merged_under_flags(tmp_path):
    inputs = tmp_path / "in.json"
    inputs.write_text('{"amount": 10, "customer": "globex"}')
    proc = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "--inputs-file", str(inputs),
                     "-i", "amount=5000", "--json", "--no-store")
    assert json.loads(proc.stdout)["results"]["assess"] == {"amount": 5000, "vip": True}


def test_failed_run_exits_1_and_names_the_block(tmp_path):
    doc = tmp_path / "fail.yaml"
    doc.write_text("id: fail\nblocks:\n  - {id: boom, type: function, with: {function: "
                   "not_registered}}\n")
    proc = flowforge("run", str(doc), "--no-store", "-q")
    assert proc.returncode == 1
    assert "boom" in proc.stdout and "no function registered as 'not_registered'" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("content, message", [
    ("id: x\nblocks: [\n", "invalid YAML at line"),
    ("id: x\nblocks:\n  - {id: a, type: set, with: {v: '{{nope.v}}'}}\n", "unknown block 'nope'"),
    ("id: x\nblocks:\n  - {id: a, type: sett}\n", "unknown block type 'sett'"),
    ("id: x\nblocks:\n  - {id: a, type: set, with: {v: '{{ input.n + }}'}}\n",
     "blocks[0].with.v: {{ input.n + }} is not a reference"),
])
def test_invalid_workflow_exits_2_with_the_place(tmp_path, content, message):
    doc = tmp_path / "bad.yaml"
    doc.write_text(content)
    for command in (["run", str(doc)], ["validate", str(doc)]):
        proc = flowforge(*command)
        assert proc.returncode == 2
        assert message in proc.stderr
        assert "Traceback" not in proc.stderr


def test_bad_inputs_and_bad_flags_exit_2():
    proc = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "--no-store")
    assert proc.returncode == 2 and "input 'amount' is required" in proc.stderr
    proc = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "--input", "amount")
    assert proc.returncode == 2 and "write it as name=value" in proc.stderr
    proc = flowforge("run", str(EXAMPLES / "nope.yaml"))
    assert proc.returncode == 2 and "no such workflow file" in proc.stderr


def test_validate_ok_and_schema_is_json_schema():
    proc = flowforge("validate", str(EXAMPLES / "nested.yaml"))
    assert proc.returncode == 0 and "ok" in proc.stdout
    schema = json.loads(flowforge("schema").stdout)
    assert schema["title"] == "flowforge workflow"
    block = schema["$defs"]["BlockSpec"]
    assert "condition" in block["properties"]["type"]["enum"]
    branches = {b["if"]["properties"]["type"]["const"]: b["then"] for b in block["allOf"]}
    condition = schema["$defs"][branches["condition"]["properties"]["with"]["$ref"].split("/")[-1]]
    assert condition["properties"]["cases"]["description"].startswith("Checked in order")


def test_schema_validates_examples_and_rejects_unknown_fields():
    import jsonschema
    import yaml

    schema = json.loads(flowforge("schema").stdout)
    for path in EXAMPLES.glob("*.yaml"):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "x", "blocks": [{"id": "a", "type": "condition",
                                                    "with": {"casez": []}}]}, schema)


def test_runs_are_stored_and_shown(tmp_path):
    env = {"FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}
    proc = flowforge("run", str(EXAMPLES / "loop_until.yaml"), "--json", env=env)
    run_id = json.loads(proc.stdout)["run_id"]
    listing = json.loads(flowforge("runs", "list", "--json", env=env).stdout)
    assert [row["run_id"] for row in listing] == [run_id]
    shown = flowforge("runs", "show", run_id, env=env)
    assert shown.returncode == 0
    assert "refine" in shown.stdout and "inputs:" in shown.stdout and "output:" in shown.stdout
    record = json.loads(flowforge("runs", "show", run_id, "--json", env=env).stdout)
    top = [b for b in record["blocks"] if b["scope"] == ""]
    assert [b["block_id"] for b in top] == ["refine", "result"]
    assert all(b["status"] == "succeeded" and b["duration_ms"] is not None for b in top)
    assert record["events"][-1]["type"] == "run_finished"
    missing = flowforge("runs", "show", "no-such-run", env=env)
    assert missing.returncode == 1 and "no run with id 'no-such-run'" in missing.stderr


def test_import_registers_user_functions():
    proc = flowforge("run", str(EXAMPLES / "scoring.yaml"), "--import",
                     str(EXAMPLES / "functions.py"), "-i", "text=One two three. Four five.",
                     "--json", "--no-store")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["outputs"] == {"easy": {"message": "Easy to read (2.5 words per sentence)",
                                        "status": 200}}
    broken = flowforge("run", str(EXAMPLES / "scoring.yaml"), "--import", "no_such_module_x")
    assert broken.returncode == 2 and "--import no_such_module_x failed" in broken.stderr


def test_runs_cancel_stops_a_run_another_process_is_running(tmp_path):
    # `flowforge run` in one process, `flowforge runs cancel` in another: they
    # share only the database.
    (tmp_path / "slow_functions.py").write_text(
        "import asyncio\nimport flowforge\n\n"
        "@flowforge.function('nap')\nasync def nap(seconds: float) -> dict:\n"
        "    await asyncio.sleep(seconds)\n    return {'slept': seconds}\n")
    doc = tmp_path / "slow.yaml"
    doc.write_text("id: slow\nblocks:\n"
                   "  - {id: quick, type: set, with: {v: 1}}\n"
                   "  - {id: nap, type: function, after: [quick],"
                   " with: {function: nap, args: {seconds: 60}}}\n")
    env = {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}"}
    running = subprocess.Popen(
        [sys.executable, "-m", "flowforge.cli.main", "run", str(doc), "--import",
         str(tmp_path / "slow_functions.py"), "--json"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_id = None
        for _ in range(600):
            listed = flowforge("runs", "list", "--json", env=env)
            rows = json.loads(listed.stdout) if listed.returncode == 0 else []
            if rows and rows[0]["status"] == "running":
                run_id = rows[0]["run_id"]
                break
            time.sleep(0.1)
        assert run_id, "the run never started"
        cancelled = flowforge("runs", "cancel", run_id, env=env)
        stdout, stderr = running.communicate(timeout=60)
    finally:
        running.kill()
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"run {run_id} cancelled" in cancelled.stdout
    assert running.returncode == 1, stderr
    result = json.loads(stdout)
    assert result["status"] == "cancelled"
    assert {b: v["status"] for b, v in result["blocks"].items()} == {
        "quick": "succeeded", "nap": "cancelled"}
    again = flowforge("runs", "cancel", run_id, env=env)
    assert again.returncode == 0 and "already ended: cancelled" in again.stdout
