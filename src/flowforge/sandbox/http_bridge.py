"""HTTP for sandboxed blocks: answered by the parent, through the SSRF guard.

A block that declares network access never opens a socket itself (its
process has no network at all); its `httpx` calls come to the parent as
`{"op": "http", method, url, params, headers, json, data}` and are sent with
`tools.http.http_request`, which checks every hop with `tools.network`'s
guard (no loopback, private, link-local or metadata addresses unless the
operator allows them).  The answer goes back as `{status, headers, text,
url}` or `{error}`.
"""

from __future__ import annotations

import json
from typing import Any

from flowforge.errors import ToolError
from flowforge.tools.http import http_request

__all__ = ["guarded_request", "MAX_BODY"]

MAX_BODY = 2_000_000


async def guarded_request(request: dict[str, Any]) -> dict[str, Any]:
    url = str(request.get("url", ""))
    data = request.get("data")
    try:
        result = await http_request(str(request.get("method", "GET")), url,
                                    headers=request.get("headers") or None,
                                    params=request.get("params") or None,
                                    json_body=request.get("json"),
                                    content=data if isinstance(data, (str, bytes)) else None,
                                    timeout=15.0, max_bytes=MAX_BODY)
    except ToolError as exc:
        return {"error": f"request refused or failed: {exc}"}
    body = result.data
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return {"status": result.status, "headers": result.headers, "text": text, "url": result.url}
