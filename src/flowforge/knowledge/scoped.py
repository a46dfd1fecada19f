"""Knowledge bases belong to a user: the view of the knowledge layer one run gets.

A base is stored under its owner: the local user's (`default`, the CLI's and
the Python API's user) under its plain name, as every base made before
ownership existed; another user's as `<user id>/<name>`; the shared space an
administrator fills as `shared/<name>`.  A run sees its own bases, then the
shared ones, and nothing else: another user's base answers exactly like one
that does not exist.  Keyword indexes are kept per user the same way.

Names users write never hold a slash (the layer refuses them), so the stored
forms cannot be reached by writing them out.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

from flowforge.errors import FlowforgeError, NotFound

__all__ = ["UserKnowledge", "LOCAL_OWNER", "SHARED", "stored_name", "public_name"]

LOCAL_OWNER = "default"
SHARED = "shared"


def stored_name(owner: str, name: str) -> str:
    return name if owner == LOCAL_OWNER else f"{owner}/{name}"


def public_name(stored: str) -> str:
    return stored.rpartition("/")[2]


class UserKnowledge:
    """One owner's view of a `Knowledge` (see the module docstring)."""

    def __init__(self, knowledge: Any, owner: str, *, shared_writes: bool = False) -> None:
        if not owner or "/" in owner:
            raise FlowforgeError(f"invalid knowledge owner {owner!r}")
        self.knowledge = knowledge
        self.owner = owner
        self.shared_writes = shared_writes
        self.store = knowledge.store

    # -- names -------------------------------------------------------------------------
    async def _visible(self) -> list[str]:
        mine, shared = [], []
        for base in await self.store.list_bases():
            if base.name.startswith(f"{SHARED}/"):
                shared.append(base.name)
            elif (base.name.startswith(f"{self.owner}/") if self.owner != LOCAL_OWNER
                  else "/" not in base.name):
                mine.append(base.name)
        return mine + shared

    async def _resolve(self, name: str) -> str:
        """The stored name of a base this owner may read: their own, else shared.
        `shared/NAME` names the shared one explicitly (for reading only: a name
        that says whose base it is cannot be taken by another owner's)."""
        if isinstance(name, str) and name.startswith(f"{SHARED}/"):
            plain = name[len(SHARED) + 1:]
            self._check(plain)
            if plain and await self.store.get_base(name) is not None:
                return name
            raise NotFound(f"no shared knowledge base named '{plain}' - an administrator "
                           f"creates it with `flowforge kb create {plain} --shared`")
        self._check(name)
        own = stored_name(self.owner, name)
        if await self.store.get_base(own) is not None:
            return own
        shared = f"{SHARED}/{name}"
        if await self.store.get_base(shared) is not None:
            return shared
        names = sorted({public_name(n) for n in await self._visible()})
        known = f" (existing: {', '.join(names)})" if names else ""
        raise NotFound(f"no knowledge base named '{name}'{known} - create it with "
                       f"`flowforge kb create {name}`")

    async def _writable(self, name: str) -> str:
        """The stored name this owner may change: their own base (or a shared one
        when allowed to write the shared space); NotFound, naming only what this
        owner sees, otherwise."""
        self._check(name)
        own = stored_name(self.owner, name)
        if await self.store.get_base(own) is not None:
            return own
        shared = f"{SHARED}/{name}"
        if self.shared_writes and await self.store.get_base(shared) is not None:
            return shared
        await self._resolve(name)                    # raises NotFound when it is not visible
        raise NotFound(f"knowledge base '{name}' is shared: only an administrator changes it")

    @staticmethod
    def _check(name: str) -> None:
        if not isinstance(name, str) or "/" in name or "\\" in name:
            raise FlowforgeError(f"invalid knowledge base name {name!r}: use 1-100 characters "
                                 f"without slashes")

    @staticmethod
    def _shown(base: Any) -> Any:
        return dataclasses.replace(base, name=public_name(base.name))

    # -- the Knowledge API, per owner -------------------------------------------------------
    async def create(self, name: str, *, shared: bool = False, **options: Any) -> Any:
        if shared and not self.shared_writes:
            raise FlowforgeError("only an administrator creates shared knowledge bases")
        self._check(name)
        stored = f"{SHARED}/{name}" if shared else stored_name(self.owner, name)
        if options.get("exist_ok") and not shared:
            try:
                return self._shown(await self.knowledge.get(await self._resolve(name)))
            except NotFound:
                pass
        return self._shown(await self.knowledge.create(name, stored_as=stored, **options))

    async def get(self, name: str) -> Any:
        return self._shown(await self.knowledge.get(await self._resolve(name)))

    async def list(self) -> list[Any]:
        visible = set(await self._visible())
        return [self._shown(base) for base in await self.knowledge.list()
                if base.name in visible]

    async def delete(self, name: str) -> bool:
        try:
            return await self.knowledge.delete(await self._writable(name))
        except NotFound:
            return False

    async def documents(self, name: str) -> list[Any]:
        return await self.knowledge.documents(await self._resolve(name))

    async def remove(self, name: str, document: str) -> int:
        return await self.knowledge.remove(await self._writable(name), document)

    async def remove_documents(self, name: str, ids: list[int]) -> int:
        return await self.knowledge.remove_documents(await self._writable(name), ids)

    async def add_paths(self, name: str, paths: Iterable[Any],
                        tags: Mapping[str, Any] | None = None, progress: Any = None) -> Any:
        return await self.knowledge.add_paths(await self._writable(name), paths, tags, progress)

    async def sync_paths(self, name: str, sources: Mapping[str, Any],
                         tags: Mapping[str, Any] | None = None, progress: Any = None) -> Any:
        return await self.knowledge.sync_paths(await self._writable(name), sources, tags,
                                               progress)

    async def add_url(self, name: str, url: str, tags: Mapping[str, Any] | None = None,
                      **options: Any) -> Any:
        return await self.knowledge.add_url(await self._writable(name), url, tags, **options)

    async def add_text(self, name: str, text: str, **options: Any) -> Any:
        return await self.knowledge.add_text(await self._writable(name), text, **options)

    async def add_documents(self, name: str, docs: list[Any], progress: Any = None,
                            **options: Any) -> Any:
        return await self.knowledge.add_documents(await self._writable(name), docs, progress,
                                                  **options)

    async def search(self, name: str, query: str, **options: Any) -> dict[str, Any]:
        return await self.knowledge.search(await self._resolve(name), query, **options)

    def _namespace(self, namespace: str) -> str:
        return namespace if self.owner == LOCAL_OWNER else f"{self.owner}/{namespace}"

    async def index_keywords(self, keywords: list[str], query: str, result_id: str, *,
                             namespace: str = "default") -> dict[str, Any]:
        return await self.knowledge.index_keywords(keywords, query, result_id,
                                                   namespace=self._namespace(namespace))

    async def lookup(self, keywords: list[str], *, namespace: str = "default") -> dict[str, Any]:
        return await self.knowledge.lookup(keywords, namespace=self._namespace(namespace))
