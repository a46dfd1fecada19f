"""HTTP calls for the `http` block and for HTTP tools, behind the SSRF guard.

One function, `http_request`, does the call both use: every hop (redirects
included) passes `network.check_url` first, the body is read up to a size
limit, and the answer is parsed as JSON when it says it is JSON (or looks
like it), else kept as text.  `http_tool` turns a configured endpoint into a
tool: `{placeholders}` in the URL are filled from the model's arguments,
the remaining arguments become the query (GET, DELETE) or the JSON body.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, urljoin


from flowforge.errors import ToolError
from flowforge.tls import certificate_hint, verified_context
from flowforge.tools.network import check_url
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["HttpResult", "http_request", "http_tool", "MAX_RESPONSE_BYTES"]

MAX_RESPONSE_BYTES = 10 * 1024 * 1024
_MAX_REDIRECTS = 5
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class HttpResult:
    status: int
    headers: dict[str, str]
    data: Any
    url: str
    duration_ms: float

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "ok": self.ok, "headers": self.headers,
                "data": self.data, "url": self.url}


async def http_request(method: str, url: str, *, headers: Mapping[str, str] | None = None,
                       params: Mapping[str, Any] | None = None, json_body: Any = None,
                       content: str | bytes | None = None, timeout: float = 30.0,
                       allow_private_network: bool = False, follow_redirects: bool = True,
                       max_bytes: int = MAX_RESPONSE_BYTES) -> HttpResult:
    """Make one request; raise ToolError for refused URLs, network failures,
    timeouts and oversized answers (HTTP error statuses are returned)."""
    import httpx    # here, not at the top: ~0.1 s every CLI start would pay for tools it never calls

    method = method.upper()
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False,
                                     verify=verified_context()) as client:
            for _hop in range(_MAX_REDIRECTS + 1):
                await check_url(url, allow_private_network)
                request = client.build_request(method, url, headers=dict(headers or {}),
                                               params=params, json=json_body, content=content)
                response = await client.send(request, stream=True)
                try:
                    if follow_redirects and response.is_redirect and "location" in response.headers:
                        url = urljoin(str(response.url), response.headers["location"])
                        if response.status_code in (301, 302, 303) and method != "HEAD":
                            method, json_body, content = "GET", None, None
                        params = None
                        continue
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body.extend(chunk)
                        if len(body) > max_bytes:
                            raise ToolError(f"the answer from '{url}' is larger than "
                                            f"{max_bytes} bytes")
                finally:
                    await response.aclose()
                return HttpResult(response.status_code, dict(response.headers),
                                  _parse(bytes(body), response.headers.get("content-type", "")),
                                  str(response.url),
                                  round((time.perf_counter() - started) * 1000, 3))
            raise ToolError(f"more than {_MAX_REDIRECTS} redirects from '{url}'")
    except httpx.TimeoutException:
        raise ToolError(f"{method} {url} timed out after {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"{method} {url} failed: {type(exc).__name__}: {exc}"
                        f"{certificate_hint(exc)}") from None


def _parse(body: bytes, content_type: str) -> Any:
    text = body.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if "json" in content_type.lower() or stripped[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def http_tool(name: str, description: str, url: str, *, method: str = "GET",
              headers: Mapping[str, str] | None = None,
              parameters: dict[str, Any] | None = None, timeout: float = 30.0,
              allow_private_network: bool = False) -> Tool:
    """A tool that calls one HTTP endpoint with the model's arguments."""
    method = method.upper()
    in_url = _PLACEHOLDER_RE.findall(url)
    if parameters is None:
        parameters = {"type": "object",
                      "properties": {key: {"type": "string"} for key in in_url},
                      "required": list(in_url)}

    async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
        rest = dict(arguments)
        missing = [key for key in in_url if key not in rest]
        if missing:
            raise ToolError(f"missing URL parameter(s): {', '.join(missing)}")
        filled = _PLACEHOLDER_RE.sub(lambda m: quote(str(rest.pop(m.group(1))), safe=""), url)
        as_query = method in ("GET", "DELETE", "HEAD")
        result = await http_request(method, filled, headers=headers,
                                    params=rest if as_query and rest else None,
                                    json_body=None if as_query else rest, timeout=timeout,
                                    allow_private_network=allow_private_network)
        if not result.ok:
            raise ToolError(f"HTTP {result.status} from {method} {result.url}: "
                            f"{str(result.data)[:500]}")
        return result.data

    return Tool(name=name, description=description, parameters=parameters, execute=execute,
                kind="http")
