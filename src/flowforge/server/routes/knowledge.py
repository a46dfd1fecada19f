"""Knowledge bases over HTTP, for the web app's knowledge page: the caller's
bases and the shared ones (an administrator's), their documents, adding a
document's text, and a search that shows each hit's score and tags.

A user sees exactly what their runs see (`knowledge.scoped.UserKnowledge`):
their own bases, then the shared ones; another user's base answers 404 like
one that does not exist.  Only one's own bases are written here, and deleted:
a base, or one document of it.  Every name a route takes passes the policy
gate (`Policy.check_kb_id`) before the knowledge layer sees it.
"""

from __future__ import annotations

import dataclasses

from pathlib import PurePosixPath
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from flowforge.server.auth import CurrentUser
from flowforge.server.errors import ApiError
from flowforge.storage.base import AlreadyExists

__all__ = ["router"]

router = APIRouter(prefix="/api/knowledge", tags=["knowledge"])

#: what a base's name may not hold (a name is never a path; the policy gate
#: decides on names such as `.` that a folder could have)
_NAME_RULE = "a knowledge base name is 1 to 100 characters, without '/', '\\' or a line break"


class NewBase(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(json_schema_extra={"pattern": r"^[^/\\\n]{1,100}$"})
    """The base's name (1-100 characters, no slashes)."""
    description: str = Field("", max_length=2000)
    """What the base holds, shown in listings."""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        # said in words: the pattern itself is no help to the person who typed the name
        if not 1 <= len(name) <= 100 or any(c in name for c in "/\\\n"):
            raise PydanticCustomError("knowledge_base_name", "'{name}' is not a usable name: "
                                      "{rule}", {"name": name[:100], "rule": _NAME_RULE})
        return name


class NewDocument(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=300)
    """The document's name (a file name); adding the same name again replaces it."""
    text: str = Field(min_length=1, max_length=5_000_000)
    """Its text (Markdown or plain text)."""
    tags: dict[str, list[str] | str] = Field(
        default_factory=dict, max_length=50,     # a name must hold more than spaces
        json_schema_extra={"propertyNames": {"pattern": "\\S"}})
    """Tags the search can filter on, e.g. `{"category": ["policies"]}`."""


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    query: str = Field(min_length=1, max_length=4000)
    """What to look for (keywords and meaning: a hybrid search)."""
    top_k: int = Field(5, ge=1, le=50)
    """How many hits at most."""
    filters: dict[str, list[str] | str] | None = Field(None, max_length=50)
    """Only chunks whose tags match, e.g. `{"category": ["legal"]}`."""


async def _knowledge(user: dict[str, Any]) -> Any:
    """The knowledge layer as this user's runs see it (the server's default store)."""
    from flowforge.knowledge.api import knowledge_for

    class _Caller:              # what knowledge_for reads of a block context
        def __init__(self) -> None:
            self.services: dict[str, Any] = {}
            self.user = {"id": user["user_id"]}

    return await knowledge_for(_Caller())


def _base_view(base: Any, shared: bool) -> dict[str, Any]:
    return {"name": base.name, "description": base.description, "shared": shared,
            "documents": base.documents, "chunks": base.chunks,
            "embedding_model": base.embedding_model}


@router.get("", summary="Your knowledge bases, then the shared ones")
async def list_bases(request: Request, user: CurrentUser) -> dict[str, Any]:
    from flowforge.knowledge.scoped import SHARED, stored_name

    knowledge = await _knowledge(user)
    shown = []
    for base in await knowledge.list():
        own = await knowledge.store.get_base(stored_name(knowledge.owner, base.name))
        full = await knowledge.get(base.name)          # with its document and chunk counts
        shown.append(_base_view(full, own is None and await knowledge.store.get_base(
            f"{SHARED}/{base.name}") is not None))
    return {"knowledge_bases": shown}


@router.post("", status_code=201, summary="Create a knowledge base of your own")
async def create_base(request: Request, body: NewBase, user: CurrentUser) -> dict[str, Any]:
    (await request.app.state.live.policy(user)).check_kb_id(body.name, "name")
    knowledge = await _knowledge(user)
    try:
        base = await knowledge.create(body.name, description=body.description)
    except AlreadyExists:
        raise ApiError(409, f"you already have a knowledge base named '{body.name}'") from None
    return _base_view(base, False)


@router.get("/{name}/documents", summary="The documents of a knowledge base")
async def documents(request: Request, name: str, user: CurrentUser) -> dict[str, Any]:
    knowledge = await _knowledge(user)
    rows = await knowledge.documents(name)
    return {"name": name, "documents": [
        {key: value for key, value in row.to_dict().items() if key != "kb"} for row in rows]}


@router.post("/{name}/documents", status_code=201,
             summary="Add a document's text to one of your knowledge bases (chunked, embedded)")
async def add_document(request: Request, name: str, body: NewDocument, user: CurrentUser
                       ) -> dict[str, Any]:
    from flowforge.knowledge.ingest import load_bytes, normalise_tags

    (await request.app.state.live.policy(user)).check_kb_id(name, "name")
    knowledge = await _knowledge(user)
    source = f"upload:{body.name}"
    tags = normalise_tags(body.tags)
    suffix = PurePosixPath(body.name).suffix.lower()
    if suffix in _PARSED:
        # as a file of that kind is read from a folder: Markdown's front matter
        # becomes tags (never text a search shows), HTML its text
        docs = [dataclasses.replace(doc, name=body.name) for doc in load_bytes(
            body.text.encode("utf-8"), name=body.name, source=source, kind=suffix, tags=tags)]
        report = await knowledge.add_documents(name, docs)
    else:
        report = await knowledge.add_text(name, body.text, document_name=body.name,
                                          tags=tags, source=source)
    return report.to_dict()


#: uploaded text of these kinds is parsed like a file of that kind (ingest.load_bytes)
_PARSED = (".md", ".markdown", ".txt", ".text", ".html", ".htm")


@router.delete("/{name}", status_code=204, summary="Delete one of your knowledge bases",
               responses={404: {"description": "No base of yours by that name (a shared "
                                                "base is not yours to delete)"}})
async def delete_base(request: Request, name: str, user: CurrentUser) -> Response:
    (await request.app.state.live.policy(user)).check_kb_id(name, "name")
    knowledge = await _knowledge(user)
    await _own(knowledge, name)
    await knowledge.delete(name)
    return Response(status_code=204)


@router.delete("/{name}/documents/{document_id}", status_code=204,
               summary="Delete one document (and its chunks) from one of your knowledge bases")
async def delete_document(request: Request, name: str, document_id: int, user: CurrentUser
                          ) -> Response:
    (await request.app.state.live.policy(user)).check_kb_id(name, "name")
    knowledge = await _knowledge(user)
    await _own(knowledge, name)
    if not any(doc.id == document_id for doc in await knowledge.documents(name)):
        raise ApiError(404, f"knowledge base '{name}' has no document {document_id}")
    await knowledge.remove_documents(name, [document_id])
    return Response(status_code=204)


async def _own(knowledge: Any, name: str) -> None:
    """404 unless `name` is a base of the caller's own: another user's is not
    found, and a shared one is read-only here (an administrator changes it
    with `flowforge kb`)."""
    from flowforge.knowledge.scoped import stored_name

    if await knowledge.store.get_base(stored_name(knowledge.owner, name)) is None:
        visible = {base.name for base in await knowledge.list()}
        if name in visible:
            raise ApiError(403, f"knowledge base '{name}' is shared: only an administrator "
                                f"changes it")
        raise ApiError(404, f"you have no knowledge base named '{name}'")


@router.post("/{name}/search", summary="Search a knowledge base: hits with scores and tags")
async def search(request: Request, name: str, body: Query, user: CurrentUser
                 ) -> dict[str, Any]:
    knowledge = await _knowledge(user)
    return await knowledge.search(name, body.query, top_k=body.top_k, filters=body.filters)
