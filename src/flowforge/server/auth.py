"""API keys: `Authorization: Bearer <key>` on every route but health and the
OpenAPI document.  A missing, unknown or revoked key answers 401.

Isolation is enforced where ids are looked up (`owned_run`): another user's
run answers 404 exactly like an unknown id, so ids leak nothing.  An admin
sees every user's runs and may act on them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, WebSocket
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from flowforge.registry import view_registry_as
from flowforge.server.errors import ApiError
from flowforge.service.users import authenticate

__all__ = ["CurrentUser", "current_user", "require_admin", "is_admin", "websocket_user",
           "websocket_protocol", "WS_PROTOCOL",
           "owned_run"]

_bearer = HTTPBearer(auto_error=False, description="An API key from `flowforge users create`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def current_user(request: Request,
                       credentials: Annotated[HTTPAuthorizationCredentials | None,
                                              Depends(_bearer)]) -> dict[str, Any]:
    if credentials is None:
        raise ApiError(401, "missing API key: send `Authorization: Bearer <key>` (create one "
                            "with `flowforge users create NAME`)", headers=_CHALLENGE)
    user = await authenticate(request.app.state.storage, credentials.credentials)
    if user is None:
        raise ApiError(401, "invalid or revoked API key", headers=_CHALLENGE)
    # the rest of this request sees the block registry as this user may: another
    # user's blocks are exactly like blocks that do not exist
    view_registry_as(None if is_admin(user) else user["user_id"])
    return user


CurrentUser = Annotated[dict[str, Any], Depends(current_user)]


def is_admin(user: dict[str, Any]) -> bool:
    return user.get("role") == "admin"


async def require_admin(user: CurrentUser) -> dict[str, Any]:
    if not is_admin(user):
        raise ApiError(403, "this route needs an admin key")
    return user


#: the subprotocol a WebSocket client offers beside `bearer.<key>`, which the
#: server selects (a browser drops a connection whose server selects none)
WS_PROTOCOL = "flowforge"
_BEARER = "bearer."


def websocket_protocol(websocket: WebSocket) -> str | None:
    """The subprotocol to accept with: `flowforge` when offered, else none
    (never the offered `bearer.<key>`: the answer would carry the key)."""
    offered = websocket.scope.get("subprotocols") or []
    return WS_PROTOCOL if WS_PROTOCOL in offered else None


async def websocket_user(websocket: WebSocket) -> dict[str, Any] | None:
    """The header as for HTTP; from a browser, which cannot set headers on a
    WebSocket, the key as a subprotocol (`Sec-WebSocket-Protocol: flowforge,
    bearer.<key>`: headers are not logged); for old clients `?token=<key>`,
    whose value the server's log never shows (`log_redaction`)."""
    header = websocket.headers.get("authorization", "")
    key = header[7:].strip() if header.lower().startswith("bearer ") else None
    for offered in websocket.scope.get("subprotocols") or []:
        if not key and offered.startswith(_BEARER):
            key = offered[len(_BEARER):]
    key = key or websocket.query_params.get("token")
    return await authenticate(websocket.app.state.storage, key)


async def owned_run(storage: Any, user: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The run row if this user may see it; otherwise 404, whoever owns it."""
    run = await storage.get_run(run_id)
    if run is None or (run.get("user_id") != user["user_id"] and not is_admin(user)):
        raise ApiError(404, f"no run '{run_id}'")
    return run

