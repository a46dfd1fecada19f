"""`flowforge import` and `flowforge export`: foreign workflow files <-> flowforge documents.

    flowforge import flow.json -o flow.yaml        # the format is detected
    flowforge import agent.json --base-url http://127.0.0.1:8000
    flowforge import dify.yml --partial -o app.yaml
    flowforge export agent.yaml --format agent -o agent.json
    flowforge export app.yaml --format dify -o app.yml

`import` asks the formats room (`flowforge.formats`) which format the file
is, writes the flowforge document (YAML, or JSON for a `.json` output;
stdout without `-o`) once it validates, and prints on stderr what each node
became, the nodes without a counterpart, the settings left behind and the
knowledge bases to create.  Exit codes: 0 written, 2 the file is not one
flowforge reads, is broken, or has nodes without a counterpart (refused
unless `--partial`): one line saying what and where, then the list.
`export` writes a document in another format: one function per format in
`EXPORTERS` (JSON, or YAML for Dify); a document with blocks the format has
no counterpart for exits 2 with the list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console

from flowforge.cli.exits import fail as _fail
from flowforge.cli.plumbing import read_text_file
from flowforge.errors import FlowforgeError
from flowforge.formats.agent_json import workflow_to_agent
from flowforge.formats.dify_export import export_dify

__all__ = ["import_command", "export_command", "register", "EXPORTERS"]

err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)

#: `flowforge export --format NAME`: a function of the document (plain data)
#: giving the foreign file's data
EXPORTERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "agent": workflow_to_agent,          # a prompt-chain Agent
    "dify": export_dify,                 # a Dify DSL app
}
#: the exports whose own files are YAML (the others are JSON), unless `-o x.json`
YAML_EXPORTS = {"dify"}


def _write(data: Any, output: Optional[Path], as_json: bool) -> None:
    from flowforge.service.importing import document_yaml

    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n" if as_json \
        else document_yaml(data)
    if output is None:
        print(text, end="")
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {output}: {exc.strerror or exc}")
    err.print(f"wrote {output}")


def import_command(
    file: Path = typer.Argument(..., help="A workflow file of another system (JSON or YAML)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Write the workflow here (.yaml, or .json)."),
    format: Optional[str] = typer.Option(None, "--format", "-f",
                                         help="The file's format (default: detected)."),
    partial: bool = typer.Option(False, "--partial",
                                 help="Import even when some nodes have no counterpart: they "
                                      "stay in the document and fail clearly if reached."),
    base_url: Optional[str] = typer.Option(None, "--base-url",
                                           help="Agent JSON: where relative event endPoints "
                                                "point (default: FLOWFORGE_CHAIN_BASE_URL)."),
) -> None:
    """Convert a workflow file of another system into a flowforge document."""
    from flowforge.service.importing import check_imported, import_text

    text = read_text_file(file, str(file))
    try:
        imported = import_text(text, str(file), partial=partial, format=format,
                               base_url=base_url)
        check_imported(imported, str(file))    # the result must be a valid workflow
    except FlowforgeError as exc:      # broken, refused (the line, then the list), invalid
        _fail(str(exc))
    for line in imported.report.lines():
        err.print(line)
    _write(imported.document, output, as_json=output is not None and output.suffix == ".json")


def export_command(
    file: Path = typer.Argument(..., help="Workflow file (YAML or JSON)."),
    format: str = typer.Option("agent", "--format", "-f",
                               help=f"What to export to: {', '.join(EXPORTERS)}."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Write here (.json, or .yaml) instead of stdout."),
) -> None:
    """Convert a workflow into another system's format."""
    from flowforge.service.loading import load

    exporter = EXPORTERS.get(format)
    if exporter is None:
        _fail(f"unknown --format {format!r}: the export formats are {', '.join(EXPORTERS)}")
    try:
        exported = exporter(load(file).document)
    except FlowforgeError as exc:      # invalid, or blocks without a counterpart (the list)
        _fail(str(exc))
    if format in YAML_EXPORTS:
        as_json = output is not None and output.suffix == ".json"
    else:
        as_json = output is None or output.suffix not in (".yaml", ".yml")
    _write(exported, output, as_json=as_json)


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
    app.command("export")(export_command)
