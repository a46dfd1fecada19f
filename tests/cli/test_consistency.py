"""The command line means one thing per exit code, takes run id prefixes,
checks its filters and never cuts an id (issue 15)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import EXAMPLES, flowforge


@pytest.fixture
def db(tmp_path):
    return {"FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}",
            "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{tmp_path / 'kb.db'}",
            "FLOWFORGE_REGISTRY_URL": f"sqlite:///{tmp_path / 'registry.db'}",
            "COLUMNS": "60"}


def _run(env) -> str:
    proc = flowforge("run", str(EXAMPLES / "branch_join.yaml"), "-i", "amount=5", "--json",
                     env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["run_id"]


@pytest.mark.parametrize("args, code, says", [
    (("runs", "show", "0123456789abcdef"), 1, "no run with id"),
    (("runs", "cancel", "0123456789abcdef"), 1, "no run with id"),
    (("blocks", "show", "no_such_block"), 1, "no_such_block"),
    (("kb", "search", "no-such-base", "x"), 1, "no-such-base"),
    (("secrets", "delete", "NOPE"), 1, "no secret 'NOPE'"),
    (("runs", "list", "--status", "bogus"), 2, "use one of queued, running, waiting, succeeded"),
    (("validate", str(EXAMPLES / "policies")), 2, "is a directory"),
])
def test_one_meaning_per_exit_code(db, args, code, says):
    proc = flowforge(*args, env=db)
    assert proc.returncode == code, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_a_name_already_taken_is_invalid_input_everywhere(db, tmp_path):
    url = db["FLOWFORGE_DATABASE_URL"]
    assert flowforge("users", "create", "zoe", "--db", url, env=db).returncode == 0
    user = flowforge("users", "create", "zoe", "--db", url, env=db)
    assert flowforge("kb", "create", "notes", env=db).returncode == 0
    base = flowforge("kb", "create", "notes", env=db)
    assert (user.returncode, base.returncode) == (2, 2), (user.stderr, base.stderr)
    assert "already exists" in user.stderr and "already exists" in base.stderr


def test_run_ids_by_unique_prefix_and_never_cut(db):
    first, second = _run(db), _run(db)
    listed = flowforge("runs", "list", env=db)
    assert first in listed.stdout and second in listed.stdout     # whole, at 60 columns
    common = 0
    while first[common] == second[common]:
        common += 1
    shown = flowforge("runs", "show", first[:common + 1], "--json", env=db)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_id"] == first
    if common:
        ambiguous = flowforge("runs", "show", first[:common], env=db)
        assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    none = flowforge("runs", "list", "--workflow", "nothing-like-it", env=db)
    assert none.returncode == 0 and "no runs match --workflow nothing-like-it" in none.stdout


def test_without_a_terminal_the_view_prints_starts_and_whole_errors(db, tmp_path):
    long_error = "x" * 300
    (tmp_path / "fail.py").write_text(
        "import flowforge\n\n@flowforge.function('fail_long')\n"
        f"def fail_long() -> dict:\n    raise RuntimeError({long_error!r})\n")
    (tmp_path / "w.yaml").write_text(
        "id: w\nblocks:\n  - {id: first, type: set, with: {x: 1}}\n"
        "  - {id: boom, type: function, after: [first], with: {function: fail_long}}\n")
    proc = flowforge("run", str(tmp_path / "w.yaml"), "--no-store", "--import",
                     str(tmp_path / "fail.py"), env=db)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines.index("▶ first started") < lines.index("▶ boom started")
    failed = next(line for line in lines if line.startswith("✘ boom failed"))
    assert long_error in failed                       # one line, whole
