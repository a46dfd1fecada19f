"""`flowforge kb ...`: create, fill, search and remove knowledge bases.

    flowforge kb create policies
    flowforge kb add policies examples/policies --tag category=policies
    flowforge kb search policies "Can I return a gift?" --top-k 3 --tag category=policies,legal
    flowforge kb list
    flowforge kb docs policies
    flowforge kb remove policies [refunds]      # a document as `kb docs` shows it

The store is `--db`, else `FLOWFORGE_KNOWLEDGE_URL`, else `knowledge.db`
beside the main database.  Exit codes: 0 done, 1 a run-time failure (a
download, the database), 2 bad input (unknown base, bad tag, bad file).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flowforge.cli.exits import fail as _fail
from flowforge.cli.options import db_option
from flowforge.errors import FlowforgeError

__all__ = ["kb_app", "matching_documents"]

kb_app = typer.Typer(help="Knowledge bases: add documents, search them.", no_args_is_help=True)
out = Console(markup=False)
err = Console(stderr=True, markup=False)

DbOption = db_option("Knowledge store database URL (default: FLOWFORGE_KNOWLEDGE_URL, "
                     "else knowledge.db beside the main database).")


def _run(coro_fn) -> Any:
    """Run one command's coroutine; turn our errors into messages and exit codes."""
    from flowforge.knowledge.api import close_all

    async def main():
        try:
            return await coro_fn()
        finally:
            await close_all()
    try:
        return asyncio.run(main())
    except FlowforgeError as exc:
        from flowforge.cli.exits import exit_code
        _fail(str(exc), exit_code(exc))


async def _open(url: Optional[str]):
    from flowforge.knowledge.api import open_knowledge
    return await open_knowledge(url)


@kb_app.command("create")
def create(name: str = typer.Argument(..., help="Name of the new knowledge base."),
           model: Optional[str] = typer.Option(None, help="Embedding model (default "
                                               "local/all-minilm-l6-v2, offline)."),
           chunk_size: Optional[int] = typer.Option(None, help="Chunk size in tokens (default 200)."),
           chunk_overlap: Optional[int] = typer.Option(None, help="Overlap in tokens (default 30)."),
           description: str = typer.Option("", help="What the base holds."),
           shared: bool = typer.Option(False, "--shared", help="In the shared space every "
                                       "user's runs read (kb add/search then name it "
                                       "shared/NAME)."),
           db: Optional[str] = DbOption) -> None:
    """Create an empty knowledge base (yours, the local user's; --shared for everyone)."""
    async def go():
        kb = await _open(db)
        return await kb.create(name, model=model, chunk_size=chunk_size,
                               chunk_overlap=chunk_overlap, description=description,
                               stored_as=f"shared/{name}" if shared else None)
    base = _run(go)
    out.print(f"created knowledge base '{base.name}' ({base.embedding_model}, chunks of "
              f"{base.chunk_size} tokens)", highlight=False)


@kb_app.command("add")
def add(name: str = typer.Argument(..., help="Knowledge base to add to."),
        paths: List[str] = typer.Argument(..., help="Files, folders or http(s) URLs."),
        tag: List[str] = typer.Option([], "--tag", "-t", help="Tag every document: key=value "
                                      "or key=v1,v2 (repeatable)."),
        create_missing: bool = typer.Option(False, "--create", help="Create the base if missing."),
        allow_private_network: bool = typer.Option(False, help="Allow URLs on private or "
                                                   "loopback addresses."),
        db: Optional[str] = DbOption) -> None:
    """Add (or update) documents: .txt .md .html .pdf .jsonl, folders, URLs."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flowforge.knowledge.api import AddReport
    from flowforge.knowledge.ingest import IngestError, load_paths, parse_tag_options

    try:
        tags = parse_tag_options(tag)
    except IngestError as exc:
        _fail(str(exc))
    urls = [p for p in paths if p.startswith(("http://", "https://"))]
    files = [p for p in paths if p not in urls]

    async def go():
        kb = await _open(db)
        if create_missing:
            await kb.create(name, exist_ok=True)
        await kb.get(name)
        total = AddReport()
        docs = await asyncio.to_thread(load_paths, files, tags) if files else []
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[chunks]} chunks"), TimeElapsedColumn(),
                      console=err, transient=True, disable=len(docs) < 3) as progress:
            task = progress.add_task(f"adding to {name}", total=len(docs), chunks=0)
            report = await kb.add_documents(
                name, docs, lambda done, _all, chunks: progress.update(task, completed=done,
                                                                       chunks=chunks))
        for part in [report] + [await kb.add_url(name, u, tags,
                                                  allow_private_network=allow_private_network)
                                for u in urls]:
            for key in ("added", "updated", "unchanged", "empty"):
                getattr(total, key).extend(getattr(part, key))
            total.chunks += part.chunks
            total.embedded += part.embedded
        return total

    report = _run(go)
    out.print(f"{name}: {len(report.added)} added, {len(report.updated)} updated, "
              f"{len(report.unchanged)} unchanged ({report.chunks} chunks stored, "
              f"{report.embedded} embedded)", highlight=False)
    if report.empty:
        err.print(f"[yellow]warning:[/] no text found in: {escape(', '.join(report.empty))} "
                  f"(a scanned PDF has no text layer)", highlight=False, markup=True)


@kb_app.command("search")
def search(name: str = typer.Argument(..., help="Knowledge base to search."),
           query: str = typer.Argument(..., help="What to look for."),
           top_k: int = typer.Option(5, "--top-k", "-k", help="How many results."),
           tag: List[str] = typer.Option([], "--tag", "-t", help="Filter: key=v1,v2 (any of the "
                                         "values; several --tag must all match)."),
           mode: str = typer.Option("hybrid", help="vector | text | hybrid"),
           min_similarity: Optional[float] = typer.Option(None, help="Drop weaker results."),
           as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
           db: Optional[str] = DbOption) -> None:
    """Search a knowledge base."""
    from flowforge.knowledge.ingest import IngestError, parse_tag_options
    try:
        filters = parse_tag_options(tag)
    except IngestError as exc:
        _fail(str(exc))

    async def go():
        kb = await _open(db)
        return await kb.search(name, query, top_k=top_k, filters=filters or None, mode=mode,
                               min_similarity=min_similarity)

    result = _run(go)
    if as_json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return
    if not result["results"]:
        out.print("no results", highlight=False)
        return
    for n, hit in enumerate(result["results"], 1):
        tags = ", ".join(f"{k}={'|'.join(v)}" for k, v in hit["metadata"]["tags"].items())
        out.print(f"[bold]{n}. {escape(hit['documentName'])}[/] #{hit['chunkIndex']}  "
                  f"similarity {hit['similarity']:.3f}"
                  + (f"  [dim]{escape(tags)}[/]" if tags else ""),
                  highlight=False, markup=True)
        text = " ".join(hit["content"].split())
        out.print(f"   {text[:300]}{'...' if len(text) > 300 else ''}", highlight=False,
                  markup=False)


@kb_app.command("list")
def list_bases(as_json: bool = typer.Option(False, "--json", help="Print JSON."),
               show_all: bool = typer.Option(False, "--all", help="Also the block registry's "
                                             "own search index (block-registry-...)."),
               db: Optional[str] = DbOption) -> None:
    """List knowledge bases."""
    async def go():
        return await (await _open(db)).list()
    bases = [b for b in _run(go) if show_all or not b.name.startswith("block-registry-")]
    if as_json:
        print(json.dumps([b.to_dict() for b in bases], indent=2))
        return
    if not bases:
        out.print("no knowledge bases - create one with `flowforge kb create NAME`", highlight=False)
        return
    table = Table("name", "documents", "chunks", "model", "chunk size")
    for b in bases:
        table.add_row(b.name, str(b.documents), str(b.chunks), b.embedding_model, str(b.chunk_size))
    out.print(table)


@kb_app.command("docs")
def docs(name: str = typer.Argument(..., help="Knowledge base."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON."),
         db: Optional[str] = DbOption) -> None:
    """List the documents of a knowledge base."""
    async def go():
        return await (await _open(db)).documents(name)
    found = _run(go)
    if as_json:
        print(json.dumps([d.to_dict() for d in found], indent=2, ensure_ascii=False))
        return
    table = Table("id", "name", "chunks", "tags", "source")
    for d in found:          # the console reads no markup: "Report [draft]" is shown as it is
        table.add_row(str(d.id), d.name, str(d.chunks),
                      ", ".join(f"{k}={'|'.join(v)}" for k, v in d.tags.items()), d.source)
    out.print(table)


def matching_documents(documents: list[Any], wanted: str) -> list[Any]:
    """The documents `wanted` names: its id as `kb docs` shows it (ids are
    unique: that document only, even when another is named with the same
    digits); else its name or source; else its file name (`refunds.md`); else
    its name or file name in any case.  Empty when nothing matches."""
    from pathlib import PurePath

    wanted = wanted.strip()
    rules = (lambda d: wanted == str(d.id),
             lambda d: wanted in (d.name, d.source),
             lambda d: wanted in (PurePath(d.source).name, PurePath(d.source).stem),
             lambda d: wanted.casefold() in (d.name.casefold(),
                                             PurePath(d.source).name.casefold()))
    for rule in rules:
        found = [d for d in documents if rule(d)]
        if found:
            return found
    return []


@kb_app.command("remove")
def remove(name: str = typer.Argument(..., help="Knowledge base."),
           document_arg: Optional[str] = typer.Argument(
               None, metavar="[DOCUMENT]", help="Remove only this document: its name as "
               "`flowforge kb docs` shows it, its file name, source or id."),
           document: Optional[str] = typer.Option(None, "--document", "-d", help="The same as "
                                                  "the DOCUMENT argument."),
           db: Optional[str] = DbOption) -> None:
    """Remove a knowledge base, or one document from it."""
    if document and document_arg and document != document_arg:
        _fail(f"two documents given ('{document_arg}' and --document '{document}'): name one")
    document = document or document_arg

    async def go():
        kb = await _open(db)
        if document is None:
            await kb.get(name)
            return await kb.delete(name)
        documents = await kb.documents(name)
        found = matching_documents(documents, document)
        if found:
            await kb.remove_documents(name, [doc.id for doc in found])
        return found, documents

    result = _run(go)
    if document is None:
        out.print(f"removed knowledge base '{name}'", highlight=False)
        return
    found, documents = result
    if not found:
        from flowforge.hints import did_you_mean
        hint = did_you_mean(document, [d.name for d in documents], 0.5)
        _fail(f"no document '{document}' in '{name}'{hint} (`flowforge kb docs {name}` lists "
              f"them)", code=1)
    out.print(f"removed {len(found)} document(s) from '{name}': "
              f"{', '.join(d.name for d in found)}", highlight=False)
