"""`--inputs-file` that cannot be read as inputs is a clear one-line error and
exit 2, never a traceback (issue 15)."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import flowforge

WORKFLOW = "id: w\ninputs: {q: {type: string}}\nblocks:\n  - {id: a, type: set, with: {q: '{{input.q}}'}}\n"


@pytest.mark.parametrize("name, content, expected", [
    ("bad.json", "{\"q\": ", "invalid JSON at line 1, column 7"),
    ("bad.yaml", "q: [1\n", "invalid YAML at line 2"),
    ("empty.yaml", "", "is empty: write a mapping such as"),
    ("list.json", "[1, 2]", "expected a mapping of input names to values, got list"),
    ("folder", None, "is a directory: give a JSON or YAML file"),
    ("binary.json", b"\xff\xfe\x00", "is not UTF-8 text"),
    ("missing.json", "absent", "no such file"),
])
def test_an_unreadable_inputs_file_is_exit_2_with_its_reason(tmp_path, name, content, expected):
    workflow = tmp_path / "w.yaml"
    workflow.write_text(WORKFLOW)
    target = tmp_path / name
    if content is None:
        target.mkdir()
    elif isinstance(content, bytes):
        target.write_bytes(content)
    elif content != "absent":
        target.write_text(content)
    proc = flowforge("run", str(workflow), "--no-store", "--inputs-file", str(target))
    assert proc.returncode == 2
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_a_good_inputs_file_runs(tmp_path):
    workflow = tmp_path / "w.yaml"
    workflow.write_text(WORKFLOW)
    (tmp_path / "in.yaml").write_text("q: refunds\n")
    proc = flowforge("run", str(workflow), "--no-store", "--json",
                     "--inputs-file", str(tmp_path / "in.yaml"))
    assert proc.returncode == 0 and '"q": "refunds"' in proc.stdout
