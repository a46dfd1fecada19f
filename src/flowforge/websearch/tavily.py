"""Tavily's search API (`POST /search`): ranked pages with extracted content,
and, with `include_answer`, a short answer written by the service.

When Tavily writes no answer, the best snippets stand in for it, so the
result always has the shape the chat expects.
"""

from __future__ import annotations

import os
import time
from typing import Mapping

import httpx

from flowforge.errors import ToolError
from flowforge.providers.retry import RetryPolicy
from flowforge.websearch.base import DEFAULT_TIMEOUT, SearchResult, clip, post_json

__all__ = ["TavilySearch"]

BASE_URL = "https://api.tavily.com"


class TavilySearch:
    name = "tavily"

    def __init__(self, *, api_key: str | None = None, search_depth: str = "basic",
                 base_url: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 retry: RetryPolicy | None = None, env: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        # A run passes its provider environment (on a server: the user's secrets and the
        # keys an administrator shares); only a direct caller falls back to os.environ.
        self.api_key = api_key or (env if env is not None else os.environ).get("TAVILY_API_KEY")
        if not self.api_key:
            raise ToolError("web_search (tavily): no API key - set TAVILY_API_KEY (or choose "
                            "`backend: offline` or `perplexity`)")
        if search_depth not in ("basic", "advanced"):
            raise ToolError(f"web_search (tavily): search_depth must be basic or advanced, "
                            f"not {search_depth!r}")
        self.search_depth = search_depth
        # TAVILY_BASE_URL comes from this process's own environment (an operator's or a
        # CLI user's), never from a run's: a tenant must not send a shared key elsewhere.
        self.base_url = (base_url or os.environ.get("TAVILY_BASE_URL") or BASE_URL).rstrip("/")
        self.timeout, self.retry, self.transport = timeout, retry, transport

    async def search(self, query: str, *, context: str | None = None,
                     max_results: int = 5) -> SearchResult:
        body = {"query": query[:400], "search_depth": self.search_depth, "include_answer": True,
                "max_results": max(1, min(max_results, 20))}
        started = time.perf_counter()
        data = await post_json(self.name, f"{self.base_url}/search", body,
                               headers={"Authorization": f"Bearer {self.api_key}"},
                               timeout=self.timeout, retry=self.retry, transport=self.transport)
        took = round((time.perf_counter() - started) * 1000, 1)
        citations = [{"title": str(item.get("title") or item.get("url")), "url": item["url"],
                      "snippet": clip(item.get("content") or "", 300),
                      **({"score": item["score"]} if isinstance(item.get("score"), (int, float))
                         else {})}
                     for item in data.get("results") or []
                     if isinstance(item, dict) and item.get("url")][:max_results]
        answer = data.get("answer") or " ".join(c["snippet"] for c in citations[:3])
        return SearchResult(answer=str(answer), citations=citations,
                            metadata={"backend": self.name, "query": query, "took_ms": took,
                                      "response_time": data.get("response_time"),
                                      **({"request_id": data["request_id"]}
                                         if data.get("request_id") else {})})
