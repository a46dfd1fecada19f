"""One user's view of the block registry.

Blocks are keyed by (owner, id) (`registry.store`).  A server user sees two
namespaces: their own, and the shared one (the bundled library and blocks an
administrator or the local user wrote).  A name resolves to the user's own
block first, so a user's block shadows a shared one of the same id, and
another user's blocks are not in the view at all: validation, `uses:`,
search, "did you mean" hints, listings, reads and deletes answer exactly as
for an id that does not exist, and anyone may save under an id another user
holds.  What a user writes lands in their own namespace only.

The view is drawn over the synchronous tables (`OwnedTables`), so the async
store and the compiler's sync reads (`Registry.now`) see the same namespaces
from one copy of this logic (`registry.store` says why the tables are sync).
"""

from __future__ import annotations

from typing import Any

from flowforge.errors import FlowforgeError
from flowforge.registry.model import BlockDefinition
from flowforge.registry.registry import Registry
from flowforge.registry.store import SHARED

__all__ = ["OwnedTables", "SharedBlock", "registry_for"]


class SharedBlock(FlowforgeError):
    """A user asked to delete a shared block: theirs to use, not to remove."""


class OwnedTables:
    """A store's `BlockTables` as user `owner` sees them: their blocks over the
    shared ones."""

    def __init__(self, tables: Any, owner: str) -> None:
        self.store = tables
        self.owner = owner

    @property
    def owners(self) -> tuple[str, ...]:
        """The namespaces this view reads, the one that wins first."""
        return (self.owner, SHARED)

    def namespace(self, block_id: str) -> str:
        """Where `block_id` resolves for this user: theirs if they hold it, else shared."""
        return self.owner if self.store.get(block_id, owner=self.owner) is not None \
            else SHARED

    def shadows(self, block_id: str) -> bool:
        """True when the user's own `block_id` hides a shared block of that id."""
        return self.namespace(block_id) == self.owner and \
            self.store.get(block_id, owner=SHARED) is not None

    def get(self, block_id: str, version: int | None = None,
            owner: str | None = None) -> BlockDefinition | None:
        namespace = self.namespace(block_id)
        found = self.store.get(block_id, version, owner=namespace)
        if found is None and version is not None and namespace == SHARED:
            # a version of a block the user deleted: kept, so old runs stay explainable
            found = self.store.get(block_id, version, owner=self.owner)
        return found

    def ids(self, **filters: Any) -> list[str]:
        filters.pop("owner", None)
        mine = set(self.store.ids(owner=self.owner))
        shared = [i for i in self.store.ids(owner=SHARED, **filters) if i not in mine]
        return sorted(set(self.store.ids(owner=self.owner, **filters)) | set(shared))

    def versions(self, block_id: str, owner: str | None = None) -> list[dict[str, Any]]:
        return self.store.versions(block_id, owner=self.namespace(block_id))

    def put(self, definition: BlockDefinition) -> BlockDefinition:
        data = definition.model_dump()
        data["metadata"] = {**data.get("metadata", {}), "owner": self.owner}
        return self.store.put(BlockDefinition.model_validate(data))

    def delete(self, block_id: str, owner: str | None = None) -> None:
        if self.store.get(block_id, owner=self.owner) is None and \
                self.store.get(block_id, owner=SHARED) is not None:
            raise SharedBlock(f"block '{block_id}' is shared: only an administrator may "
                              f"delete it (a block of yours with that id would be used "
                              f"instead of it)")
        self.store.delete(block_id, owner=self.owner)

    def text_search(self, query: str, limit: int = 10,
                    owners: tuple[str, ...] | None = None) -> list[tuple[str, str, float]]:
        return self.store.text_search(query, limit, self.owners)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def registry_for(registry: Registry, owner: str | None, *, admin: bool = False) -> Registry:
    """`registry` as user `owner` sees it (an administrator, or no user: the
    shared blocks, which are theirs to write)."""
    tables = registry.store.tables
    if isinstance(tables, OwnedTables):
        tables = tables.store
    if admin or not owner:
        return registry if tables is registry.store.tables else \
            Registry(registry.store.over(tables), registry.searcher)
    return Registry(registry.store.over(OwnedTables(tables, owner)), registry.searcher)
