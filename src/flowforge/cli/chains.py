"""`flowforge import` and `flowforge export`: prompt-chain Agents <-> workflows.

    flowforge import agent.json -o agent.yaml          # every node a visible block
    flowforge export agent.yaml --format agent -o agent.json

`flowforge run agent.json` runs an Agent file directly; importing shows
(and lets one edit) the native workflow it runs as.  Exit codes: 0 written,
2 the file cannot be converted (every problem listed, located).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from rich.console import Console

from flowforge.cli.exits import fail as _fail
from flowforge.errors import WorkflowError

__all__ = ["import_command", "export_command", "register", "to_yaml"]

err = Console(stderr=True, soft_wrap=True, markup=False)


class _Dumper(yaml.SafeDumper):
    """Multi-line text (prompts) as `|` blocks, so the file reads like the prompt."""


def _text(dumper: yaml.SafeDumper, value: str) -> Any:
    if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" "):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _text)


def to_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def _write(data: Any, output: Optional[Path], as_json: bool) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n" if as_json else to_yaml(data)
    if output is None:
        print(text, end="")
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {output}: {exc.strerror or exc}")
    err.print(f"wrote {output}")


def import_command(
    file: Path = typer.Argument(..., help="Agent definition (JSON or YAML) with `promptChain`."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Write the workflow here (.yaml, or .json)."),
    base_url: Optional[str] = typer.Option(None, "--base-url",
                                           help="Where relative event endPoints point "
                                                "(default: FLOWFORGE_CHAIN_BASE_URL)."),
) -> None:
    """Convert a prompt-chain Agent into the equivalent native workflow."""
    from flowforge.apps.chains import agent_to_workflow, is_agent
    from flowforge.service.loading import load
    from flowforge.workflow.loader import parse_text

    try:
        data = parse_text(file.read_text(encoding="utf-8"), str(file))
    except FileNotFoundError:
        _fail(f"no such file: {file}")
    except (IsADirectoryError, UnicodeDecodeError):
        _fail(f"{file} is not a text file")
    except WorkflowError as exc:
        _fail(str(exc))
    if not is_agent(data):
        _fail(f"{file} is not an Agent definition (it has no `promptChain`)")
    try:
        workflow = agent_to_workflow(data, base_url=base_url, source=str(file))
        load(workflow)                          # the result must be a valid workflow
    except WorkflowError as exc:
        _fail(str(exc))
    _write(workflow, output, as_json=output is not None and output.suffix == ".json")


def export_command(
    file: Path = typer.Argument(..., help="Workflow file (YAML or JSON)."),
    format: str = typer.Option("agent", "--format", "-f",
                               help="What to export to: agent (a prompt-chain Agent)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Write here (.json, or .yaml) instead of stdout."),
) -> None:
    """Convert a workflow made of chain-shaped blocks into a prompt-chain Agent."""
    from flowforge.apps.chains import workflow_to_agent
    from flowforge.service.loading import load

    if format != "agent":
        _fail(f"unknown --format {format!r}: the only export format is agent")
    try:
        agent = workflow_to_agent(load(file))
    except WorkflowError as exc:
        _fail(str(exc))
    _write(agent, output, as_json=output is None or output.suffix != ".yaml"
           and output.suffix != ".yml")


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
    app.command("export")(export_command)
