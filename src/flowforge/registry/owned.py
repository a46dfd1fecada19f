"""One user's view of the block registry.

Blocks a user adds (or a build of theirs writes) carry `metadata.owner`; the
bundled library and an administrator's blocks carry none and are everyone's.
On a server every request sees the registry through its user's view, so
another user's block is exactly like one that does not exist: validation,
`uses:`, search, "did you mean" hints, listings and reads never show it.
Block ids are one namespace, so writing a block under an id another user
holds is refused as a taken id, naming nobody.
"""

from __future__ import annotations

from typing import Any

from flowforge.registry.model import BlockDefinition
from flowforge.registry.registry import Registry
from flowforge.storage.base import AlreadyExists

__all__ = ["OwnedStore", "registry_for"]


class OwnedStore:
    """A `BlockStore` that holds only what `owner` may see (a proxy)."""

    def __init__(self, store: Any, owner: str) -> None:
        self.store = store
        self.owner = owner

    def visible(self, definition: BlockDefinition | None) -> bool:
        owner = getattr(definition.metadata, "owner", None) if definition else None
        return definition is not None and (not owner or owner == self.owner)

    def get(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        found = self.store.get(block_id, version)
        return found if self.visible(found) else None

    def ids(self, **filters: Any) -> list[str]:
        return [i for i in self.store.ids(**filters) if self.visible(self.store.get(i))]

    def versions(self, block_id: str) -> list[dict[str, Any]]:
        return self.store.versions(block_id) if self.get(block_id) is not None else []

    def put(self, definition: BlockDefinition) -> BlockDefinition:
        current = self.store.get(definition.id)
        if current is not None and not self.visible(current):
            raise AlreadyExists(f"the block id '{definition.id}' is taken: choose another id")
        return self.store.put(definition)

    def delete(self, block_id: str) -> None:
        if self.get(block_id) is not None:
            self.store.delete(block_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def registry_for(registry: Registry, owner: str | None, *, admin: bool = False) -> Registry:
    """`registry` as user `owner` sees it (an administrator, or no user: all of it)."""
    if admin or not owner:
        return registry
    store: Any = OwnedStore(registry.store, owner)
    return Registry(store, registry.searcher)
