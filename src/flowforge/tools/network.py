"""The SSRF guard: where a workflow's HTTP calls may go.

A URL in a workflow is often built from run inputs or by a model, so a
request to `http://169.254.169.254/` (cloud metadata), `localhost` or an
intranet address would let a run read what the caller cannot.  Every host is
resolved and each address it resolves to is checked; loopback, private,
link-local, reserved, multicast and unspecified addresses are refused unless
the block allows them (`allow_private_network: true`) or the process does
(`set_allow_private_network(True)`, or `FLOWFORGE_ALLOW_PRIVATE_NETWORK=1`;
tests use it to reach their own 127.0.0.1 servers).  Redirects are followed
by the caller one hop at a time so each hop is checked too.

Known limit: the address is checked at resolution time; a DNS answer that
changes between the check and the connection (rebinding) is not caught.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
from typing import Iterator
from urllib.parse import urlsplit

from flowforge.errors import ToolError

__all__ = ["check_url", "set_allow_private_network", "private_network_allowed",
           "allowing_private_network", "is_public_address"]

_ALLOW_PRIVATE = False


def set_allow_private_network(allowed: bool) -> None:
    """Process-wide switch (tests, trusted single-user deployments)."""
    global _ALLOW_PRIVATE
    _ALLOW_PRIVATE = bool(allowed)


def private_network_allowed() -> bool:
    return _ALLOW_PRIVATE or os.environ.get("FLOWFORGE_ALLOW_PRIVATE_NETWORK", "") in (
        "1", "true", "yes")


@contextlib.contextmanager
def allowing_private_network(allowed: bool = True) -> Iterator[None]:
    """Temporarily set the process-wide switch."""
    previous = _ALLOW_PRIVATE
    set_allow_private_network(allowed)
    try:
        yield
    finally:
        set_allow_private_network(previous)


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved
                or ip.is_multicast or ip.is_unspecified)


_BLOCK_HINT = ("set `allow_private_network: true` on the block if this workflow may reach "
               "internal services")


async def check_url(url: str, allow_private: bool = False, *, hint: str = _BLOCK_HINT) -> None:
    """Raise ToolError unless `url` is http(s) and (when private addresses are
    not allowed) every address its host resolves to is public.  `hint` ends the
    refusal of a private address: how the caller's user may allow it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"URL '{url}' must start with http:// or https://")
    host = parts.hostname
    if not host:
        raise ToolError(f"URL '{url}' names no host")
    if allow_private or private_network_allowed():
        return
    try:
        addresses = [host] if _is_ip(host) else await _resolve(host, parts.port)
    except OSError as exc:
        raise ToolError(f"cannot resolve host '{host}' of URL '{url}': {exc}") from None
    blocked = [address for address in addresses if not is_public_address(address)]
    if blocked:
        raise ToolError(
            f"refused to call '{url}': host '{host}' is a loopback, private or link-local "
            f"address ({', '.join(sorted(set(blocked)))}); {hint}")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


async def _resolve(host: str, port: int | None) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]
