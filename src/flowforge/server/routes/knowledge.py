"""Knowledge bases over HTTP, for the web app's knowledge page: the caller's
bases and the shared ones (an administrator's), their documents, adding a
document's text, and a search that shows each hit's score and tags.

A user sees exactly what their runs see (`knowledge.scoped.UserKnowledge`):
their own bases, then the shared ones; another user's base answers 404 like
one that does not exist.  Only one's own bases are written here.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from flowforge.server.auth import CurrentUser
from flowforge.server.errors import ApiError
from flowforge.storage.base import AlreadyExists

__all__ = ["router"]

router = APIRouter(prefix="/api/knowledge", tags=["knowledge"])

_NAME = r"^[^/\\\n]{1,100}$"


class NewBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_NAME)
    """The base's name (no slashes)."""
    description: str = Field("", max_length=2000)


class NewDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=300)
    """The document's name (a file name); adding the same name again replaces it."""
    text: str = Field(min_length=1, max_length=5_000_000)
    """Its text (Markdown or plain text)."""
    tags: dict[str, list[str] | str] = Field(
        default_factory=dict, max_length=50,     # a name must hold more than spaces
        json_schema_extra={"propertyNames": {"pattern": "\\S"}})
    """Tags the search can filter on, e.g. `{"category": ["policies"]}`."""


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(5, ge=1, le=50)
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
    knowledge = await _knowledge(user)
    report = await knowledge.add_text(name, body.text, document_name=body.name,
                                      tags=body.tags, source=f"upload:{body.name}")
    return report.to_dict()


@router.post("/{name}/search", summary="Search a knowledge base: hits with scores and tags")
async def search(request: Request, name: str, body: Query, user: CurrentUser
                 ) -> dict[str, Any]:
    knowledge = await _knowledge(user)
    return await knowledge.search(name, body.query, top_k=body.top_k, filters=body.filters)
