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
