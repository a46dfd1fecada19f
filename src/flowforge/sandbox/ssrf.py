"""HTTP for sandboxed blocks, through an SSRF guard.

A block that declares network access never opens a socket itself: its
`httpx` calls come to the parent, which sends them from here.  The guard
refuses URLs that are not http(s) and hosts that resolve to loopback,
private, link-local, multicast or reserved addresses (the cloud metadata
endpoint among them), unless the operator allows them with
`FLOWFORGE_SANDBOX_ALLOW_HOSTS=host1,host2` (tests use it for 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from typing import Any
from urllib.parse import urlsplit

import httpx

__all__ = ["SSRFBlocked", "check_url", "guarded_request"]

MAX_BODY = 2_000_000


class SSRFBlocked(Exception):
    """The URL points somewhere a block must not reach."""


def _allowed_hosts() -> set[str]:
    return {h.strip() for h in os.environ.get("FLOWFORGE_SANDBOX_ALLOW_HOSTS", "").split(",")
            if h.strip()}


async def check_url(url: str) -> None:
    """Raise SSRFBlocked when `url` is not a public http(s) address."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SSRFBlocked(f"only http(s) URLs with a host are allowed, not {url!r}")
    host = parts.hostname
    if host in _allowed_hosts():
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443,
                                                             type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise SSRFBlocked(f"cannot resolve {host}: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global or address.is_multicast:
            raise SSRFBlocked(f"{host} resolves to the non-public address {address}; blocks may "
                              f"only reach public hosts (operators can allow a host with "
                              f"FLOWFORGE_SANDBOX_ALLOW_HOSTS)")


async def guarded_request(request: dict[str, Any],
                          client: httpx.AsyncClient | None = None) -> dict[str, Any]:
    """Answer one `{"op": "http", method, url, params, headers, json, data}`
    from a sandboxed block: `{status, headers, text, url}` or `{error}`."""
    url = request.get("url", "")
    try:
        await check_url(url)
    except SSRFBlocked as exc:
        return {"error": f"request refused: {exc}"}
    owned = client is None
    client = client or httpx.AsyncClient(timeout=15.0, follow_redirects=False)
    try:
        response = await client.request(request.get("method", "GET"), url,
                                        params=request.get("params"),
                                        headers=request.get("headers"),
                                        json=request.get("json"), data=request.get("data"))
        text = response.text[:MAX_BODY]
        return {"status": response.status_code, "headers": dict(response.headers),
                "text": text, "url": str(response.url)}
    except httpx.HTTPError as exc:
        return {"error": f"HTTP request to {url} failed: {exc}"}
    finally:
        if owned:
            await client.aclose()
