"""Who am I (with my webhook secret), and user administration for admins."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict

from flowforge.server.auth import CurrentUser, require_admin
from flowforge.service.users import create_user, public_user

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["users"])

Admin = Annotated[dict[str, Any], Depends(require_admin)]


class NewUser(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    role: str = "user"
    """"user" or "admin"."""


@router.get("/me", summary="The caller, with the secret that signs their webhooks")
async def me(user: CurrentUser) -> dict[str, Any]:
    return public_user(user, with_secret=True)


@router.get("/users", summary="Every user (admin)")
async def list_users(request: Request, admin: Admin) -> dict[str, Any]:
    users = await request.app.state.storage.list_users()
    return {"users": [public_user(u) for u in users]}


@router.post("/users", status_code=201,
             summary="Create a user (admin); the answer holds their API key, shown once")
async def add_user(request: Request, body: NewUser, admin: Admin) -> dict[str, Any]:
    user, key = await create_user(request.app.state.storage, body.name, body.role)
    return {**public_user(user), "api_key": key}
