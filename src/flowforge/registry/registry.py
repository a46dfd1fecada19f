"""The block registry: add, get, list, delete, version and search blocks.

    registry = get_registry()                       # the process default (see below)
    await registry.add({"id": "word_count", ...})   # checked, stored as a new version
    hits = await registry.search("count the words of a text", limit=5)
    registry.now.find("word_count")                 # a synchronous read, for the compiler

The process default opens the SQLite file named by `FLOWFORGE_REGISTRY_URL`,
else by `FLOWFORGE_DATABASE_URL`, else the user's flowforge database, and
adds the bundled starter library the first time (and again when a bundled
block changes).  Search is hybrid through the knowledge layer
(`FLOWFORGE_REGISTRY_SEARCH=hybrid`, the default; it falls back to text by
itself when embedding fails) or text only (`text`).

Every method is async, like the store's.  Code that is not async and must
read the library while it checks a document (the compiler's `uses:` checks,
the Pipeline JSON converter) reads it through `Registry.now`: a sync facade
over the same tables, with `find` and `ids` only, so it always sees what
was just written and never copies the logic (`registry.store` says why the
tables underneath are synchronous).  Opening a registry, and seeding the
starter library then, is synchronous too: it happens once per process.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from flowforge.errors import NotFound, WorkflowError
from flowforge.hints import did_you_mean
from flowforge.registry.model import BlockDefinition, definition_from_data
from flowforge.registry.search import BlockSearch, KnowledgeSearch, TextSearch
from flowforge.registry.store import BlockStore, BlockTables, block_store_from_url, owner_of

__all__ = ["Registry", "RegistryReads", "SearchResult", "get_registry", "set_registry", "use_registry",
           "view_registry_as", "registry_view",
           "library_definitions", "LIBRARY_DIR", "read_definition_file"]

LIBRARY_DIR = Path(__file__).with_name("library")


@dataclass
class SearchResult:
    definition: BlockDefinition
    score: float
    via: str

    def to_dict(self) -> dict[str, Any]:
        return {"block": self.definition.public(), "score": self.score, "via": self.via}


def read_definition_file(path: str | Path) -> BlockDefinition:
    """A block definition from a YAML or JSON file, fully checked."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WorkflowError(f"block file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise WorkflowError(f"invalid YAML/JSON: {exc}", source=str(path)) from None
    if not isinstance(data, dict):
        raise WorkflowError("a block file holds one mapping (id, name, description, ...)",
                            source=str(path))
    return definition_from_data(data, str(path))


def library_definitions() -> list[BlockDefinition]:
    """The bundled starter library, in id order.  Every registry opened seeds
    from it, and reading and checking its files costs ~0.1 s, so that is done
    once per process (again if a file changes); each caller gets copies."""
    files = tuple((path.name, stat.st_mtime_ns, stat.st_size)
                  for path in sorted(LIBRARY_DIR.glob("*.yaml")) for stat in [path.stat()])
    return [definition.model_copy(deep=True)
            for definition in _checked_library(str(LIBRARY_DIR), files)]


@functools.lru_cache(maxsize=4)
def _checked_library(folder: str, files: tuple[tuple[str, int, int], ...]
                     ) -> tuple[BlockDefinition, ...]:
    return tuple(read_definition_file(Path(folder) / name) for name, _, _ in files)


class RegistryReads:
    """The registry for a synchronous caller checking a document: the block a
    `uses:` names, and the ids to suggest when it names none.  It reads the
    store's tables on the calling thread (a SQLite file: microseconds; a
    PostgreSQL server: one query)."""

    def __init__(self, tables: BlockTables) -> None:
        self.tables = tables

    def find(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        return self.tables.get(block_id, version)

    def ids(self) -> list[str]:
        return self.tables.ids()


class Registry:
    """Blocks by id, with versions and search."""

    def __init__(self, store: BlockStore, search: BlockSearch | None = None) -> None:
        self.store = store
        self.searcher = search or TextSearch(store)

    @classmethod
    def open(cls, url: str | None = None, *, seed: bool = True,
             search: str | None = None) -> Registry:
        """A registry on `url` (a SQLite URL or path, `:memory:` for a
        throwaway one, or a PostgreSQL URL; default: where the runs are
        stored), seeded with the starter library."""
        store = block_store_from_url(url or _default_url())
        registry = cls(store, _searcher(store, search))
        if seed:
            _seed(store.tables)
        return registry

    def close(self) -> None:
        self.store.close()

    @property
    def now(self) -> RegistryReads:
        """Synchronous reads for document-time checks (see the module docstring)."""
        return RegistryReads(self.store.tables)

    # -- CRUD ----------------------------------------------------------------------
    async def add(self, definition: BlockDefinition | dict[str, Any], *,
                  created_by: str | None = None) -> BlockDefinition:
        """Check and store `definition` as the block's next version."""
        data = definition.model_dump(exclude={"version"}) if isinstance(
            definition, BlockDefinition) else dict(definition)
        data.pop("version", None)
        if created_by is not None:
            data["metadata"] = {**(data.get("metadata") or {}), "created_by": created_by}
        checked = definition_from_data(data, f"block '{data.get('id', '?')}'")
        return await self.store.put(checked)

    async def find(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        return await self.store.get(block_id, version)

    async def get(self, block_id: str, version: int | None = None) -> BlockDefinition:
        found = await self.store.get(block_id, version)
        if found is None:
            if version is not None and await self.store.get(block_id) is not None:
                versions = ", ".join(str(v["version"]) for v in await self.versions(block_id))
                raise NotFound(f"block '{block_id}' has no version {version}; versions: "
                               f"{versions}")
            hint = did_you_mean(block_id, await self.store.ids()) or \
                " (see `flowforge blocks list`)"
            raise NotFound(f"no block '{block_id}' in the registry{hint}")
        return found

    async def list(self, *, category: str | None = None, created_by: str | None = None,
                   execution_type: str | None = None) -> list[BlockDefinition]:
        ids = await self.store.ids(category=category, created_by=created_by,
                                   execution_type=execution_type)
        return [d for d in [await self.store.get(i) for i in ids] if d]

    async def ids(self) -> list[str]:
        return await self.store.ids()

    async def delete(self, block_id: str) -> None:
        await self.store.delete(block_id)

    async def versions(self, block_id: str) -> list[dict[str, Any]]:
        return await self.store.versions(block_id)

    async def shadows(self, block_id: str) -> bool:
        """True when the viewer's own `block_id` hides a shared block of that id
        (`registry.owned`); never for the shared view."""
        shadows = getattr(self.store.tables, "shadows", None)
        return bool(shadows and await self.store.call(shadows, block_id))

    async def source(self, block_id: str, version: int | None = None) -> str:
        """The body: Python source, or the prompt template (with its system prompt)."""
        definition = await self.get(block_id, version)
        if definition.execution_type == "python":
            return definition.source_code or ""
        system = f"# system\n{definition.system_prompt}\n\n# prompt\n" \
            if definition.system_prompt else ""
        return system + (definition.prompt_template or "")

    # -- search ----------------------------------------------------------------------
    async def search(self, query: str, limit: int = 5, *, execution_type: str | None = None,
                     category: str | None = None) -> list[SearchResult]:
        hits = await self.searcher.search(query, max(limit * 3, 10), owners=self.store.owners)
        results = []
        for hit in hits:
            definition = await self.store.get(hit.id)
            if definition is None or owner_of(definition) != hit.owner:
                continue                # gone, or a shared block the user's own shadows
            if execution_type and definition.execution_type != execution_type:
                continue
            if category and definition.category != category:
                continue
            results.append(SearchResult(definition, hit.score, hit.via))
        results.sort(key=lambda result: -result.score)        # best first, whatever the source
        return results[:limit]

    @property
    def search_mode(self) -> str:
        failed = getattr(self.searcher, "failed", None)
        return "text (embedding failed)" if failed else self.searcher.mode

    # -- the starter library -----------------------------------------------------------
    async def seed_library(self) -> list[str]:
        """Add bundled blocks that are missing or changed; returns their ids.
        A user's own later version of a bundled block is left alone."""
        return await self.store.call(_seed, self.store.tables)


def _seed(tables: BlockTables) -> list[str]:
    """`Registry.seed_library` on the tables themselves (`Registry.open` seeds
    before any event loop may be running)."""
    added = []
    for definition in library_definitions():
        current = tables.get(definition.id)
        if current is not None and current.metadata.created_by != "library":
            continue
        stored = tables.put(definition)
        if current is None or stored.version != current.version:
            added.append(definition.id)
    return added


def _default_url() -> str:
    url = os.environ.get("FLOWFORGE_REGISTRY_URL")
    if url:
        return url
    from flowforge.storage import default_database_url
    return default_database_url()             # SQLite or PostgreSQL: where the runs are


def _searcher(store: BlockStore, mode: str | None) -> BlockSearch:
    mode = (mode or os.environ.get("FLOWFORGE_REGISTRY_SEARCH") or "hybrid").lower()
    if mode == "text":
        return TextSearch(store)
    return KnowledgeSearch(store, model=os.environ.get("FLOWFORGE_REGISTRY_EMBEDDINGS") or None)


_DEFAULT: dict[str, Registry] = {}
_EXPLICIT: list[Registry] = []
_ACTIVE: contextvars.ContextVar[Registry | None] = contextvars.ContextVar("registry",
                                                                          default=None)


@contextlib.contextmanager
def use_registry(registry: Registry) -> Iterator[Registry]:
    """Within this block (and tasks it starts), `get_registry()` is `registry`."""
    token = _ACTIVE.set(registry)
    try:
        yield registry
    finally:
        _ACTIVE.reset(token)
_LOCK = threading.Lock()

#: The user whose view `get_registry()` gives (None: all of it): a server request's user.
_VIEWER: contextvars.ContextVar[str | None] = contextvars.ContextVar("registry_viewer",
                                                                     default=None)


def view_registry_as(owner: str | None) -> None:
    """For the rest of the current task and the tasks it starts, `get_registry()`
    shows only what user `owner` may see (`registry.owned`); None: everything
    (an administrator, the local user)."""
    _VIEWER.set(owner)


def registry_view() -> dict[str, Any] | None:
    """How the current task sees the registry, as data another process can
    take on (`viewer`, `registry_url`); None when the registry was set in code
    (`set_registry`, `use_registry`): an object cannot be shipped."""
    if _ACTIVE.get() is not None or _EXPLICIT:
        return None
    return {"viewer": _VIEWER.get(), "registry_url": _default_url()}


def set_registry(registry: Registry | None) -> None:
    """Make `registry` the one `uses:` blocks, the CLI and the server use
    (None returns to the default from the environment)."""
    _EXPLICIT.clear()
    if registry is not None:
        _EXPLICIT.append(registry)


def get_registry() -> Registry:
    """The explicit registry if one was set, else the default for the
    current environment (one per database URL, opened on first use); as the
    current viewer sees it (`view_registry_as`)."""
    viewer = _VIEWER.get()
    registry = _current()
    if viewer is None or isinstance(registry.store.tables, _owned().OwnedTables):
        return registry
    return _owned().registry_for(registry, viewer)


def _owned() -> Any:
    from flowforge.registry import owned     # the view module imports this one
    return owned


def _current() -> Registry:
    active = _ACTIVE.get()
    if active is not None:
        return active
    if _EXPLICIT:
        return _EXPLICIT[0]
    url = _default_url()
    with _LOCK:
        registry = _DEFAULT.get(url)
        if registry is None:
            registry = _DEFAULT[url] = Registry.open(url)
        return registry
