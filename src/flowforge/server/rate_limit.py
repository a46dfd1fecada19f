"""A per-user request rate, so one user's flood cannot slow anyone else (issue 23).

Each user has a token bucket: it holds at most `burst` requests and refills
at `rate` per second; a request takes one token, and with none left it is
answered 429 with `Retry-After` at once, outermost, before the body is read,
the key checked against the database or any route runs, so a refused
request costs microseconds.  The user is the API key's: the key's user id is
looked up once (concurrent requests with one key share the lookup) and
remembered for a minute; a request without a key, or with one that is no
user's, counts against its client address instead.  The route still checks
the key as always: this only decides whose bucket pays.

Not limited: `/health` (monitors poll it), and reads of what is not the API
(the web app's pages and assets, `/docs`, `/manual/`, the OpenAPI document).
A WebSocket (following one run's events) is one connection, authenticated
once: not counted either.
The bucket is hand-written (a dozen lines) because the libraries at hand
count fixed or sliding windows: neither gives a steady rate with a burst and
the exact wait before the next token, which `Retry-After` reports.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from typing import Any

from flowforge.server.errors import error_body

__all__ = ["RateLimit", "TokenBuckets"]

#: how long a key's user id is remembered (a revoked key is refused by the route
#: at once; only whose bucket it draws from lags)
_KEY_SECONDS = 60.0
_MAX_ENTRIES = 50_000
_API_PREFIXES = ("/api/", "/agent-workflow")


class TokenBuckets:
    """One token bucket per key: `rate` tokens a second, at most `burst` held."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, now: float | None = None) -> float:
        """Take one token: 0.0 when there was one, else the seconds until there is."""
        now = time.monotonic() if now is None else now
        tokens, stamp = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - stamp) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > _MAX_ENTRIES:
            self._forget_full(now)
        return (1.0 - tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled: they hold nothing a new one would not."""
        self._buckets = {key: (tokens, stamp) for key, (tokens, stamp) in self._buckets.items()
                         if tokens + (now - stamp) * self.rate < self.burst}


class RateLimit:
    """Pure ASGI middleware: the per-user request rate (see the module's docstring)."""

    def __init__(self, app: Any, rate: float, burst: int) -> None:
        self.app = app
        self.buckets = TokenBuckets(rate, burst) if rate > 0 else None
        self._users: dict[str, tuple[float, asyncio.Future]] = {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self.buckets is None or scope["type"] != "http" or not _limited(scope):
            await self.app(scope, receive, send)
            return
        key = _bearer(scope)
        user = await self._user_of(scope, key) if key else None
        client = scope.get("client") or ("unknown", 0)
        wait = self.buckets.take(f"user:{user}" if user else f"address:{client[0]}")
        if wait:
            await self._refuse(send, wait)
            return
        await self.app(scope, receive, send)

    async def _user_of(self, scope: dict, key: str) -> str | None:
        """The key's user id (None: no user's), looked up once a minute at most."""
        digest = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()
        now = time.monotonic()
        cached = self._users.get(digest)
        if cached is None or cached[0] < now:
            if len(self._users) >= _MAX_ENTRIES:
                self._users = {k: v for k, v in self._users.items() if v[0] >= now}
                if len(self._users) >= _MAX_ENTRIES:
                    self._users.clear()
            future: asyncio.Future = asyncio.get_running_loop().create_future()
            self._users[digest] = (now + _KEY_SECONDS, future)
            try:
                user = await _lookup(scope, key)
            except Exception:           # the database: the route will answer for it
                user = None
                self._users.pop(digest, None)
            except BaseException:       # cancelled: the requests waiting on it go on
                self._users.pop(digest, None)
                future.set_result(None)
                raise
            future.set_result(user)
            return user
        return await asyncio.shield(cached[1])

    async def _refuse(self, send: Any, wait: float) -> None:
        assert self.buckets is not None
        seconds = max(1, math.ceil(wait))
        rate = f"{self.buckets.rate:g}"
        message = (f"too many requests: over this server's rate of {rate} requests a second "
                   f"per user (bursts of {self.buckets.burst}); retry after {seconds} s. "
                   f"The administrator sets it with `flowforge serve --max-user-rate` and "
                   f"`--max-user-burst` (FLOWFORGE_MAX_USER_RATE, FLOWFORGE_MAX_USER_BURST)")
        payload = json.dumps(error_body(429, message, "rate_limited")).encode()
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode()),
                                (b"retry-after", str(seconds).encode())]})
        await send({"type": "http.response.body", "body": payload})


def _limited(scope: dict) -> bool:
    """Every API request; not /health, nor reads of pages, assets and documents."""
    path = scope.get("path", "")
    if path == "/health":
        return False
    return scope.get("method") not in ("GET", "HEAD") or path.startswith(_API_PREFIXES)


def _bearer(scope: dict) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                return text[7:].strip() or None
            return None
    return None


async def _lookup(scope: dict, key: str) -> str | None:
    from flowforge.service.users import authenticate

    storage = getattr(scope["app"].state, "storage", None)
    if storage is None:
        return None
    user = await authenticate(storage, key)
    return user["user_id"] if user else None
