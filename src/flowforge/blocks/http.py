"""`http`: one HTTP request, built from templates, answer parsed.

    - id: order
      type: http
      with:
        method: POST
        url: "https://api.example.com/orders/{{input.order_id}}/refund"
        headers: {Authorization: "Bearer {{env.SHOP_TOKEN}}"}
        body: {reason: "{{input.reason}}", amount: "{{calc.amount}}"}   # sent as JSON
        timeout: 10

A status of 400 or more
fails the block (with the status and the start of the body) unless
`fail_on_status: false`.

SSRF guard: loopback, private and link-local addresses (and hosts that
resolve to them; redirects are checked hop by hop) are refused unless the
block says `allow_private_network: true` or the process allows it
(`flowforge.tools.network.set_allow_private_network`, or
`FLOWFORGE_ALLOW_PRIVATE_NETWORK=1`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from flowforge.blocks.base import (BlockConfig, BlockContext, BlockType, Output, is_set,
                                   policy_of)
from flowforge.blocks.type_table import register_block
from flowforge.workflow.policy import CapabilityUse
from flowforge.errors import BlockError, ToolError
from flowforge.tools.http import http_request

__all__ = ["HttpBlock", "HttpConfig"]


class HttpConfig(BlockConfig):
    url: str
    """http(s) URL (templates allowed)."""
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "GET"
    """The HTTP method."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Request headers (templates allowed; a `{{secrets.NAME}}` may go in a value, e.g.
    `Authorization`)."""
    query: dict[str, Any] = Field(default_factory=dict)
    """Query-string parameters."""
    body: Any = None
    """Request body: a mapping or list is sent as JSON, a string as it is."""
    timeout: float = Field(30.0, gt=0)
    """Seconds for the whole request."""
    follow_redirects: bool = True
    """Follow redirects, each hop's address checked as `url` is (false: a 3xx answer
    is the output)."""
    fail_on_status: bool = True
    """Fail the block on a 4xx/5xx answer (else output it)."""
    allow_private_network: bool = False
    """Allow loopback, private and link-local addresses (internal services)."""


@register_block
class HttpBlock(BlockType):
    """Calls an HTTP endpoint; the answer is parsed (JSON or text)."""

    type_name = "http"
    Config = HttpConfig
    outputs = {
        "status": Output("integer", "The HTTP status of the answer."),
        "ok": Output("boolean", "True when the status is below 400."),
        "headers": Output("object", "The answer's headers."),
        "data": Output("any", "The answer's body: parsed JSON when it is JSON, else the text."),
        "url": Output("string", "The URL that answered (after redirects)."),
    }
    credential_fields = ("headers.*",)

    @classmethod
    def capabilities(cls, spec: Any) -> list[CapabilityUse]:
        if is_set(spec.with_.get("allow_private_network")):
            return [CapabilityUse("private_network", "allow_private_network",
                                  "calling private addresses")]
        return []

    @classmethod
    async def run(cls, context: BlockContext, config: HttpConfig) -> Any:
        if config.allow_private_network:
            policy_of(context).require("private_network", "with.allow_private_network",
                                       f"block '{context.block_id}' calling private addresses")
        json_body = config.body if isinstance(config.body, (dict, list, int, float, bool)) \
            else None
        content = config.body if isinstance(config.body, str) else None
        try:
            trace = context.trace_headers() if hasattr(context, "trace_headers") else {}
            result = await http_request(
                config.method, config.url, headers={**trace, **_idempotency(context),
                                                    **config.headers},
                params=config.query or None, json_body=json_body, content=content,
                timeout=config.timeout, allow_private_network=config.allow_private_network,
                follow_redirects=config.follow_redirects)
        except ToolError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        if config.fail_on_status and result.status >= 400:
            excerpt = result.data if isinstance(result.data, str) else str(result.data)
            raise BlockError(context.block_id, cls.type_name,
                             f"{config.method} {result.url} answered HTTP {result.status}: "
                             f"{excerpt[:300]}")
        return result.to_dict()


def _idempotency(context: Any) -> dict[str, str]:
    """`Idempotency-Key`: the same when the block runs again after a crash (a header
    the workflow sets wins)."""
    key = getattr(context, "idempotency_key", None)
    return {"Idempotency-Key": key} if isinstance(key, str) else {}
