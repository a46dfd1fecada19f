"""`flowforge blocks ...`: the block registry from the terminal.

    flowforge blocks list [--category process] [--created-by thinker] [--json]
    flowforge blocks show ID [--version N] [--owner USER_ID] [--json]
    flowforge blocks source ID
    flowforge blocks add FILE            # YAML or JSON definition; a new version if the id exists
    flowforge blocks search "count the words of a text" [--limit 5]
    flowforge blocks test ID             # run its examples (Python in the sandbox)
    flowforge blocks delete ID

Exit codes: 0 done, 1 a test failed, 2 bad input (unknown id, invalid file).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flowforge.cli.exits import exit_code, fail as _fail
from flowforge.errors import FlowforgeError

__all__ = ["blocks_app", "definition_yaml"]

blocks_app = typer.Typer(help="The block registry: list, show, add, search, test.",
                         no_args_is_help=True)
out = Console(markup=False)
err = Console(stderr=True, markup=False)


def _registry():
    from flowforge.registry import get_registry
    try:
        return get_registry()
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))


_JSON = "Print JSON."
_VERSION = "A version number (default: the latest)."
_BLOCK_ID = "A block id from the registry (`flowforge blocks list`)."


@blocks_app.command("list")
def list_blocks(category: Optional[str] = typer.Option(None, "--category",
                                                       help="Only this category."),
                created_by: Optional[str] = typer.Option(None, "--created-by",
                                                         help="library, user or thinker"),
                execution_type: Optional[str] = typer.Option(None, "--type",
                                                             help="python or llm"),
                as_json: bool = typer.Option(False, "--json", help=_JSON)) -> None:
    """List the registry's blocks."""
    blocks = asyncio.run(_registry().list(category=category, created_by=created_by,
                                          execution_type=execution_type))
    if as_json:
        print(json.dumps([b.public() for b in blocks], ensure_ascii=False))
        return
    table = Table("id", "v", "type", "category", "by", "description")
    for block in blocks:
        table.add_row(block.id, str(block.version), block.execution_type, block.category,
                      block.metadata.created_by, block.description)
    out.print(table)


@blocks_app.command("show")
def show_block(block_id: str = typer.Argument(..., help=_BLOCK_ID), version: Optional[int] = typer.Option(None, "--version", help=_VERSION),
               owner: Optional[str] = typer.Option(
                   None, "--owner", help="A server user's id: the block that user's "
                                         "`uses:` gets (theirs, else the shared one)."),
               as_json: bool = typer.Option(False, "--json", help=_JSON)) -> None:
    """A block's full definition: the shared one (the library's, an
    administrator's, yours on this machine). On a server, block ids are per
    user, and a user's own block shadows a shared block of the same id for
    that user: `--owner USER_ID` shows what that user gets, and says when it
    shadows a shared one."""
    from flowforge.registry import registry_for

    registry = _registry()
    if owner:
        registry = registry_for(registry, owner)
    try:
        block = asyncio.run(registry.get(block_id, version))
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))
    if owner and asyncio.run(registry.shadows(block_id)):
        err.print(f"user {owner}'s own block '{block_id}': it shadows the shared block of "
                  f"that id for them", highlight=False)
    if as_json:
        print(json.dumps(block.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    print(definition_yaml(block.model_dump(mode="json")), end="")


def definition_yaml(definition: dict) -> str:
    """YAML that `blocks add` reads back as the same definition, whatever the
    terminal's width: lines are never wrapped (neither by YAML nor by the
    console), and multi-line text (source code, prompts) is a literal block."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                       style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    return yaml.dump(definition, Dumper=Dumper, sort_keys=False, allow_unicode=True,
                     width=float("inf"))


@blocks_app.command("source")
def block_source(block_id: str = typer.Argument(..., help=_BLOCK_ID), version: Optional[int] = typer.Option(None, "--version", help=_VERSION)
                 ) -> None:
    """A block's Python source or prompt template."""
    try:
        print(asyncio.run(_registry().source(block_id, version)))
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))


@blocks_app.command("add")
def add_block(file: Path = typer.Argument(..., help="Block definition (YAML or JSON).")) -> None:
    """Add a block (checked first; a new version when the id exists)."""
    from flowforge.registry import read_definition_file
    try:
        definition = read_definition_file(file)
        saved = asyncio.run(_registry().add(definition))
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))
    out.print(f"added [bold]{escape(saved.id)}[/] version {saved.version}", markup=True)


@blocks_app.command("delete")
def delete_block(block_id: str = typer.Argument(..., help=_BLOCK_ID)) -> None:
    """Hide a block (its versions are kept)."""
    try:
        asyncio.run(_registry().delete(block_id))
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))
    out.print(f"deleted {block_id}")


@blocks_app.command("search")
def search_blocks(query: str = typer.Argument(..., help="What the block should do, in words."),
                  limit: int = typer.Option(5, "--limit", min=1, max=50, help="How many results."),
                  execution_type: Optional[str] = typer.Option(None, "--type", help="python or llm"),
                  as_json: bool = typer.Option(False, "--json", help=_JSON)) -> None:
    """Find blocks by what they do."""
    registry = _registry()
    hits = asyncio.run(registry.search(query, limit, execution_type=execution_type))
    if as_json:
        print(json.dumps({"results": [h.to_dict() for h in hits],
                          "mode": registry.search_mode}, ensure_ascii=False))
        return
    table = Table("id", "score", "type", "description", title=f"search: {registry.search_mode}")
    for hit in hits:
        table.add_row(hit.definition.id, f"{hit.score:.4g}", hit.definition.execution_type,
                      hit.definition.description)
    out.print(table)


@blocks_app.command("test")
def test_block(block_id: str = typer.Argument(..., help=_BLOCK_ID), version: Optional[int] = typer.Option(None, "--version", help=_VERSION),
               model: Optional[str] = typer.Option(None, "--model", "-m",
                                                   help="Model for LLM blocks."),
               as_json: bool = typer.Option(False, "--json", help=_JSON)) -> None:
    """Run a block's examples; exit 1 if one fails."""
    from flowforge.blocks.registry_block import run_examples
    try:
        block = asyncio.run(_registry().get(block_id, version))
        report = asyncio.run(run_examples(block, model=model))
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))
    if as_json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, default=str))
    else:
        for result in report.results:
            mark = "[green]pass[/]" if result["ok"] else "[red]fail[/]"
            detail = result.get("error") or json.dumps(result.get("output"))
            out.print(f"example {escape(str(result['example']))}: {mark} {escape(detail)}",
                      highlight=False, markup=True)
        if report.note:
            out.print(report.note)
    raise typer.Exit(0 if report.passed else 1)
