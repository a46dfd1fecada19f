"""Who am I (with my webhook secret), and user administration for admins."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict

from flowforge.server.auth import CurrentUser, require_admin
from flowforge.service.grants import grant, grants_of, revoke, subject_of
from flowforge.service.users import create_user, find_user, public_user
from flowforge.server.errors import ApiError
from flowforge.workflow.policy import CAPABILITIES

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["users"])

Admin = Annotated[dict[str, Any], Depends(require_admin)]


class NewUser(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """The user's name, unique on this server."""
    role: str = "user"
    """"user" or "admin"."""


class NewGrant(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    capability: str
    """One of local_commands, server_files, server_env, provider_endpoints, private_network."""


@router.get("/me", summary="The caller, with the secret that signs their webhooks and the "
                           "capabilities their workflows have")
async def me(request: Request, user: CurrentUser) -> dict[str, Any]:
    capabilities = await grants_of(request.app.state.storage, user)
    return {**public_user(user, with_secret=True), "capabilities": sorted(capabilities)}


@router.get("/capabilities", summary="What each capability lets a workflow do, and every grant "
                                     "(admin)")
async def list_grants(request: Request, admin: Admin) -> dict[str, Any]:
    return {"capabilities": CAPABILITIES,
            "grants": await request.app.state.storage.list_grants()}


async def _subject(request: Request, target: str) -> str:
    if target.startswith("role:"):
        return subject_of(role=target[5:])
    return subject_of(await find_user(request.app.state.storage, target))


@router.post("/users/{target}/grants", status_code=201,
             summary="Grant a capability to a user (name or id) or a role (`role:user`) (admin)")
async def add_grant(request: Request, target: str, body: NewGrant, admin: Admin
                    ) -> dict[str, Any]:
    subject = await _subject(request, target)
    new = await grant(request.app.state.storage, subject, body.capability, by=admin["name"])
    return {"subject": subject, "capability": body.capability, "new": new}


@router.delete("/users/{target}/grants/{capability}", status_code=204,
               summary="Take a capability back (admin)")
async def remove_grant(request: Request, target: str, capability: str, admin: Admin
                       ) -> Response:
    subject = await _subject(request, target)
    if not await revoke(request.app.state.storage, subject, capability):
        raise ApiError(404, f"{target} has no grant of {capability}")
    return Response(status_code=204)


@router.get("/users", summary="Every user (admin)")
async def list_users(request: Request, admin: Admin) -> dict[str, Any]:
    users = await request.app.state.storage.list_users()
    return {"users": [public_user(u) for u in users]}


@router.post("/users", status_code=201,
             summary="Create a user (admin); the answer holds their API key, shown once")
async def add_user(request: Request, body: NewUser, admin: Admin) -> dict[str, Any]:
    user, key = await create_user(request.app.state.storage, body.name, body.role)
    return {**public_user(user), "api_key": key}
