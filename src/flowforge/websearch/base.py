"""What every web search back end shares: one result shape, one HTTP rule.

The RAG chat (and the research workflows) must not care which service found
a page, so every back end returns `{answer, citations, metadata}`:

    answer     a short text answering the query (the service's own summary when it
               writes one, else the best snippets joined)
    citations  [{title, url, snippet}] in the order the service ranked them
    metadata   {backend, query, took_ms, ...the service's extra fields}

HTTP back ends go through `post_json`, which applies the provider layer's retry
rule (429, 408 and 5xx retried with backoff and `Retry-After`; other 4xx never)
and a timeout, so a slow or failing search service is handled exactly like a
slow or failing model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

import httpx

from flowforge.errors import ProviderError, ToolError
from flowforge.providers.retry import (RetryPolicy, connection_error, error_from_status,
                                       timeout_error)
from flowforge.tls import certificate_hint, verified_context

__all__ = ["SearchResult", "WebSearchBackend", "post_json", "DEFAULT_TIMEOUT", "search_error", "clip",
           "screen_result", "ScreenedSearch"]

DEFAULT_TIMEOUT = 30.0


@dataclass
class SearchResult:
    answer: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    findings: list[Any] = field(default_factory=list, repr=False)
    """What `screen_result` withheld (`knowledge.injection.Finding`s), for the caller's
    events and its last check of the answer; never sent (not in `to_dict`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"answer": self.answer, "citations": self.citations, "metadata": self.metadata}


class WebSearchBackend(Protocol):
    name: str

    async def search(self, query: str, *, context: str | None = None,
                     max_results: int = 5) -> SearchResult: ...


def screen_result(result: SearchResult) -> SearchResult:
    """`result` with every page and answer that addresses the model withheld
    (`flowforge.knowledge.injection`): a page's snippet becomes the note and the
    citation is marked `withheld`; a flagged answer becomes the note; the
    count goes in `metadata.withheld`.  A web page is data, never instructions."""
    from flowforge.knowledge.injection import find_instructions, withheld_note

    findings = []
    citations = []
    for citation in result.citations:
        where = f"web page <{citation.get('url')}>"
        finding = find_instructions(f"{citation.get('title') or ''}\n"
                                    f"{citation.get('snippet') or ''}", where=where)
        if finding is not None:
            citation = {**citation, "snippet": withheld_note(finding),
                        "withheld": finding.to_dict()}
            findings.append(finding)
        citations.append(citation)
    answer = result.answer
    finding = find_instructions(answer, where=f"the {result.metadata.get('backend') or 'web'} "
                                              f"search's answer")
    if finding is not None:
        answer = withheld_note(finding) + " Read the citations that are not withheld."
        findings.append(finding)
    if not findings:
        return result
    return SearchResult(answer, citations, {**result.metadata, "withheld": len(findings)},
                        findings)


class ScreenedSearch:
    """A back end whose results pass `screen_result`: what every caller gets."""

    def __init__(self, backend: WebSearchBackend) -> None:
        self.backend = backend
        self.name = backend.name

    async def search(self, query: str, *, context: str | None = None,
                     max_results: int = 5) -> SearchResult:
        return screen_result(await self.backend.search(query, context=context,
                                                       max_results=max_results))


def search_error(backend: str, exc: ProviderError) -> ToolError:
    """A failed search as the tool error the model (and the user) reads."""
    return ToolError(f"web_search ({backend}): {exc}")


async def post_json(backend: str, url: str, body: Mapping[str, Any], *,
                    headers: Mapping[str, str], timeout: float = DEFAULT_TIMEOUT,
                    retry: RetryPolicy | None = None,
                    transport: httpx.AsyncBaseTransport | None = None) -> dict[str, Any]:
    """POST `body` as JSON, retried per `retry`; the decoded JSON object answer."""
    retry = retry or RetryPolicy(attempts=3)
    attempt = 0
    async with httpx.AsyncClient(timeout=timeout, transport=transport,
                                 verify=verified_context()) as client:
        while True:
            attempt += 1
            try:
                response = await client.post(url, json=dict(body), headers=dict(headers))
                if response.status_code >= 400:
                    raise error_from_status(backend, response.status_code,
                                            _error_text(response), response.headers)
                try:
                    data = response.json()
                except ValueError:
                    raise ProviderError("the answer was not JSON", provider=backend,
                                        status=response.status_code) from None
                if not isinstance(data, dict):
                    raise ProviderError("the answer was not a JSON object", provider=backend)
                return data
            except httpx.TimeoutException as exc:
                error = timeout_error(backend, f"no answer within {timeout:g} s ({exc})")
            except httpx.TransportError as exc:
                hint = certificate_hint(exc)     # a refused certificate: no retry mends it
                error = ProviderError(f"could not connect: {exc}{hint}", provider=backend) \
                    if hint else connection_error(backend, str(exc) or type(exc).__name__)
            except ProviderError as exc:
                error = exc
            delay = retry.delay_for(error, attempt)
            if delay is None:
                raise search_error(backend, error) from None
            await retry.sleep(delay)


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(data, dict):
        detail = data.get("error") or data.get("detail") or data.get("message") or data
        if isinstance(detail, dict):
            detail = detail.get("message") or detail
        return str(detail)[:300]
    return str(data)[:300]


def clip(text: Any, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

