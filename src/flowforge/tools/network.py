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
from typing import Any, Iterator
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


_SHARED = ipaddress.ip_network("100.64.0.0/10")       # carrier-grade NAT; cloud metadata too
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPAT = ipaddress.ip_network("::/96")                # IPv4-compatible ::a.b.c.d (deprecated)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries and a network may route to:
    IPv4-mapped, 6to4 (2002::/16), Teredo (2001::/32, server and client),
    NAT64 (64:ff9b::/96) and IPv4-compatible forms."""
    found = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def is_public_address(address: str) -> bool:
    """True for an address on the public internet; False for loopback,
    private, link-local, shared (100.64/10), reserved, multicast and
    unspecified ones, including IPv4 ones hidden in IPv6 forms."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    candidates: list[Any] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        candidates.extend(_embedded_ipv4(ip))
    for candidate in candidates:
        if (candidate.is_private or candidate.is_loopback or candidate.is_link_local
                or candidate.is_reserved or candidate.is_multicast or candidate.is_unspecified
                or (isinstance(candidate, ipaddress.IPv4Address) and candidate in _SHARED)):
            return False
    return True


_BLOCK_HINT = ("set `allow_private_network: true` on the block if this workflow may reach "
               "internal services")


async def check_url(url: str, allow_private: bool = False, *, hint: str = _BLOCK_HINT) -> None:
    """Raise ToolError unless `url` is http(s) and (when private addresses are
    not allowed) every address its host resolves to is public.  `hint` ends the
    refusal of a private address: how the caller's user may allow it."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:                # `http://[x`, a port that is not a number
        raise ToolError(f"URL '{url}' is malformed: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"URL '{url}' must start with http:// or https://")
    try:
        import httpx

        httpx.URL(url)                        # what the request would be built from
        if host:
            host.encode("idna")
    except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
        raise ToolError(f"URL '{url}' is malformed: {exc}") from None
    if not host:
        raise ToolError(f"URL '{url}' names no host")
    if allow_private or private_network_allowed():
        return
    try:
        addresses = [host] if _is_ip(host) else await _resolve(host, port)
    except (OSError, UnicodeError, ValueError) as exc:     # `http://\u0080` cannot be encoded
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
