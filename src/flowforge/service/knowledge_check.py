"""`flowforge validate` against the knowledge store: a knowledge block's tag
filter that no document of its base can match is refused before anything runs.

A run would fail that block anyway (`knowledge.search` refuses a filter that
can never match rather than return a silent empty list); validate says it
earlier, located at the block's `with.filters`.  Only what the document fixes
is checked: a literal base name and literal filters, on a base that exists
in the store already (a base built from `sources:` at run time, or a name
made by a template, is left to the run), and only when the store exists, so
validating never creates a database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowforge.errors import FlowforgeError, NotFound, Problem

__all__ = ["knowledge_filter_problems"]


def _literal(value: Any) -> bool:
    return "{{" not in repr(value)


def _store_exists(url: str) -> bool:
    if url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return True
    if ":memory:" in url:
        return False
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else url
    return Path(path).is_file()


async def knowledge_filter_problems(compiled: Any, *, knowledge: Any = None) -> list[Problem]:
    """Problems of the document's knowledge blocks whose filters can match no
    document of their (existing) base; `knowledge` (a `Knowledge`) defaults to
    the configured store, seen as the local user sees it."""
    from flowforge.knowledge.search import check_filters, filter_problems

    wanted = [(where, spec) for where, spec in compiled.doc.iter_blocks()
              if spec.type == "knowledge" and spec.with_.get("filters")
              and not spec.with_.get("sources")
              and isinstance(spec.with_.get("knowledge_base"), str)
              and _literal(spec.with_.get("knowledge_base")) and _literal(spec.with_["filters"])]
    if not wanted:
        return []
    opened = None
    if knowledge is None:
        from flowforge.knowledge.api import Knowledge
        from flowforge.knowledge.store import default_knowledge_url

        url = default_knowledge_url()
        if not _store_exists(url):
            return []
        knowledge = opened = await Knowledge.open(url)
    from flowforge.knowledge.scoped import LOCAL_OWNER, UserKnowledge

    view = UserKnowledge(knowledge, LOCAL_OWNER)
    problems: list[Problem] = []
    try:
        for where, spec in wanted:
            name = spec.with_["knowledge_base"]
            place = f"{where}.with.filters"
            try:
                filters = check_filters(spec.with_["filters"])
                stored = await view._resolve(name)     # its own, else the shared one
            except NotFound:
                continue                    # not known here: the run will say
            except FlowforgeError as exc:
                problems.append(Problem(place, str(exc)))
                continue
            documents = await knowledge.store.list_documents(stored)
            for message in filter_problems(filters, documents, name):
                problems.append(Problem(place, message.partition(": ")[2] + " - fix the "
                                        "filter, or tag the documents (`flowforge kb add ... "
                                        "--tag key=value`)"))
    finally:
        if opened is not None:
            await opened.close()
    return problems
