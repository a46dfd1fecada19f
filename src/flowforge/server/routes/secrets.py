"""A user's secrets: set, list (names only), delete.  No route returns a value;
runs of the same user read them as `{{secrets.NAME}}`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from flowforge.server.auth import CurrentUser
from flowforge.service.secrets import MAX_SECRET_BYTES, check_secret_name, delete_secret, \
    list_secrets, set_secret

__all__ = ["router"]

router = APIRouter(prefix="/api/secrets", tags=["secrets"])


class NewSecret(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Letters, digits and '_', e.g. OPENAI_API_KEY (a provider reads a key by that name)."""
    value: str = Field(min_length=1, max_length=MAX_SECRET_BYTES)
    """Stored encrypted; never returned by any route."""


@router.post("", status_code=201, summary="Create or replace one of your secrets")
async def put_secret(request: Request, body: NewSecret, user: CurrentUser) -> dict[str, Any]:
    storage = request.app.state.storage
    await set_secret(storage, user["user_id"], body.name, body.value)
    row = next(r for r in await list_secrets(storage, user["user_id"]) if r["name"] == body.name)
    return dict(row)


@router.get("", summary="Your secrets' names and times (never their values)")
async def get_secrets(request: Request, user: CurrentUser) -> dict[str, Any]:
    return {"secrets": await list_secrets(request.app.state.storage, user["user_id"])}


@router.delete("/{name}", status_code=204, summary="Delete one of your secrets")
async def remove_secret(request: Request, name: str, user: CurrentUser) -> Response:
    check_secret_name(name)
    await delete_secret(request.app.state.storage, user["user_id"], name)
    return Response(status_code=204)
