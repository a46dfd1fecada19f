"""Perplexity's Sonar API: an OpenAI-compatible chat completion that searches
the web and returns the pages it used as `citations` (URLs) and, in newer
answers, `search_results` ([{title, url, date}]).

Sonar writes its own answer, so `answer` is the model's text; `context` (what
the knowledge base already said) goes in the system message so the search
looks for what is missing instead of repeating what is known.
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping

import httpx

from flowforge.errors import ToolError
from flowforge.providers.retry import RetryPolicy
from flowforge.websearch.base import DEFAULT_TIMEOUT, SearchResult, clip, post_json

__all__ = ["PerplexitySearch"]

BASE_URL = "https://api.perplexity.ai"
_SYSTEM = ("Answer the question from current web sources, concisely and factually, and cite "
           "the pages you used.")


class PerplexitySearch:
    name = "perplexity"

    def __init__(self, *, api_key: str | None = None, model: str = "sonar",
                 base_url: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 retry: RetryPolicy | None = None, env: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        # A run passes its provider environment (on a server: the user's secrets and the
        # keys an administrator shares); only a direct caller falls back to os.environ.
        self.api_key = api_key or (env if env is not None else os.environ).get("PERPLEXITY_API_KEY")
        if not self.api_key:
            raise ToolError("web_search (perplexity): no API key - set PERPLEXITY_API_KEY (or "
                            "choose `backend: offline` or `tavily`)")
        self.model = model
        # PERPLEXITY_BASE_URL comes from this process's own environment (an operator's or a
        # CLI user's), never from a run's: a tenant must not send a shared key elsewhere.
        self.base_url = (base_url or os.environ.get("PERPLEXITY_BASE_URL") or BASE_URL).rstrip("/")
        self.timeout, self.retry, self.transport = timeout, retry, transport

    async def search(self, query: str, *, context: str | None = None,
                     max_results: int = 5) -> SearchResult:
        system = _SYSTEM
        if context:
            system += (" The user already knows the following from their own documents; "
                       "look for what it does not cover:\n" + clip(context, 2000))
        body = {"model": self.model, "temperature": 0.2,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": query}]}
        started = time.perf_counter()
        data = await post_json(self.name, f"{self.base_url}/chat/completions", body,
                               headers={"Authorization": f"Bearer {self.api_key}"},
                               timeout=self.timeout, retry=self.retry, transport=self.transport)
        took = round((time.perf_counter() - started) * 1000, 1)
        try:
            answer = data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ToolError("web_search (perplexity): the answer had no choices[0].message."
                            "content") from None
        return SearchResult(answer=str(answer), citations=_citations(data, max_results),
                            metadata={"backend": self.name, "query": query,
                                      "model": data.get("model", self.model), "took_ms": took,
                                      "usage": data.get("usage") or {}})


def _citations(data: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in data.get("search_results") or []:
        if isinstance(item, dict) and item.get("url") and item["url"] not in seen:
            seen.add(item["url"])
            found.append({"title": str(item.get("title") or item["url"]), "url": item["url"],
                          "snippet": clip(item.get("snippet") or "", 300),
                          **({"date": item["date"]} if item.get("date") else {})})
    for url in data.get("citations") or []:
        if isinstance(url, str) and url not in seen:
            seen.add(url)
            found.append({"title": url, "url": url, "snippet": ""})
    return found[:limit]
