"""Every option and argument of every command says what it is for, and flags
show no type (issue 15: no `<bool>` noise in `--help`)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from flowforge.cli.main import app


def _commands(command, path: tuple[str, ...] = ()):
    yield path, command
    if hasattr(command, "commands"):          # typer 0.2x groups are not click.Group
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


def test_every_option_and_argument_has_help():
    root = typer.main.get_command(app)
    missing = []
    for path, command in _commands(root):
        for param in command.params:
            if param.name == "help":
                continue
            if not (getattr(param, "help", None) or "").strip():
                missing.append(f"flowforge {' '.join(path)} {param.opts[0]}")
    assert missing == []


def test_help_pages_show_no_bool_metavar():
    root = typer.main.get_command(app)
    runner = CliRunner()
    for path, _ in _commands(root):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "160"})
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, path


def test_usage_lines_name_arguments_in_capitals_for_every_command():
    """`Usage: flowforge run [OPTIONS] FILE`, not `{file}` (issue 44): every
    command with arguments, as the installed `flowforge` prints it."""
    import re

    from flowforge.cli.main import command
    from tests.in_process import flowforge

    checked = 0
    for path, sub in _commands(command()):
        arguments = [p for p in sub.params if p.param_type_name == "argument"]
        if not arguments:
            continue
        usage = flowforge(*path, "--help", env={"COLUMNS": "200"}).stdout.splitlines()[0]
        assert "{" not in usage, usage
        for argument in arguments:
            name = (argument.metavar or argument.name.upper()).strip("[]")
            assert re.search(rf"\b{re.escape(name)}\b", usage), (path, usage)
        checked += 1
    assert checked > 20
    assert flowforge("run", "--help").stdout.startswith("Usage: flowforge run [OPTIONS] FILE\n")
    assert "NAME PATHS...\n" in flowforge("kb", "add", "--help").stdout
    assert "NAME [DOCUMENT]\n" in flowforge("kb", "remove", "--help").stdout


def test_runs_show_help_says_what_json_and_events_print(tmp_path):
    """`--json` always holds the events; `--events` adds them to the plain view
    only: the help says so and the command does so."""
    import json

    from tests.in_process import flowforge

    env = {"FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}", "COLUMNS": "200"}
    (tmp_path / "one.yaml").write_text(
        "version: 1\nid: one\nblocks:\n  - {id: a, type: set, with: {v: 1}}\n")
    run_id = json.loads(flowforge("run", str(tmp_path / "one.yaml"), "--json",
                                  env=env).stdout)["run_id"]
    help_text = " ".join(flowforge("runs", "show", "--help", env=env).stdout.split())
    assert "`--json` always includes them" in help_text
    record = json.loads(flowforge("runs", "show", run_id, "--json", env=env).stdout)
    assert record["events"][-1]["type"] == "run_finished"
    plain = flowforge("runs", "show", run_id, env=env).stdout
    listed = flowforge("runs", "show", run_id, "--events", env=env).stdout
    assert "run_finished" not in plain and "run_finished" in listed
