"""The web search back ends against recorded HTTP exchanges (written from each
service's documented request and answer shapes; never the live internet):
what is sent, how the answer is normalised, and how failures are handled."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from flowforge.errors import ToolError
from flowforge.providers.retry import RetryPolicy
from flowforge.websearch import (OfflineSearch, PerplexitySearch, TavilySearch, make_backend)

RECORDED = Path(__file__).parent / "recorded"


def replay(*names: str):
    """A transport answering each request with the next recording, and the requests."""
    exchanges = [json.loads((RECORDED / f"{name}.json").read_text()) for name in names]
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        exchange = exchanges.pop(0)
        assert request.method == exchange["request"]["method"]
        assert str(request.url) == exchange["request"]["url"]
        answer = exchange["response"]
        return httpx.Response(answer["status"], headers=answer["headers"], json=answer["json"])

    return httpx.MockTransport(handle), sent


NO_WAIT = RetryPolicy(attempts=3, sleep=lambda seconds: _no_sleep())


async def _no_sleep() -> None:
    return None


async def test_perplexity_sends_a_chat_completion_and_normalises_citations():
    transport, sent = replay("perplexity_search")
    search = PerplexitySearch(api_key="pplx-test", transport=transport)
    result = (await search.search("EU withdrawal period", context="Policy: 30 days")).to_dict()
    body = json.loads(sent[0].content)
    assert sent[0].headers["authorization"] == "Bearer pplx-test"
    assert body["model"] == "sonar"
    assert body["messages"][1] == {"role": "user", "content": "EU withdrawal period"}
    assert "Policy: 30 days" in body["messages"][0]["content"]
    assert result["answer"].startswith("Within the EU, consumers may withdraw")
    assert result["citations"] == [
        {"title": "Right of withdrawal - European Commission",
         "url": "https://commission.europa.eu/consumer-rights/withdrawal", "snippet": "",
         "date": "2024-05-02"},
        {"title": "https://europa.eu/youreurope/citizens/consumers/shopping/guarantees-returns",
         "url": "https://europa.eu/youreurope/citizens/consumers/shopping/guarantees-returns",
         "snippet": ""}]
    assert result["metadata"]["backend"] == "perplexity"
    assert result["metadata"]["usage"]["total_tokens"] == 59


async def test_tavily_sends_the_search_and_keeps_the_ranked_pages():
    transport, sent = replay("tavily_search")
    search = TavilySearch(api_key="tvly-test", transport=transport)
    result = (await search.search("EU right of withdrawal online purchase")).to_dict()
    assert json.loads(sent[0].content) == {"query": "EU right of withdrawal online purchase",
                                           "search_depth": "basic", "include_answer": True,
                                           "max_results": 5}
    assert sent[0].headers["authorization"] == "Bearer tvly-test"
    assert result["answer"] == ("EU consumers have 14 days to cancel an online purchase "
                                "without giving a reason.")
    assert [c["url"] for c in result["citations"]] == [
        "https://europa.eu/youreurope/citizens/consumers/shopping/guarantees-returns",
        "https://commission.europa.eu/consumer-rights-directive"]
    assert result["citations"][0]["score"] == 0.93
    assert result["metadata"]["request_id"] == "123e4567-e89b-12d3-a456-426614174111"


async def test_a_rate_limited_search_is_retried_then_answers():
    transport, sent = replay("tavily_rate_limited", "tavily_search")
    search = TavilySearch(api_key="tvly-test", transport=transport, retry=NO_WAIT)
    result = await search.search("EU right of withdrawal online purchase")
    assert len(sent) == 2 and result.citations


async def test_rate_limited_every_time_is_a_clear_tool_error():
    transport, sent = replay(*["tavily_rate_limited"] * 3)
    search = TavilySearch(api_key="tvly-test", transport=transport, retry=NO_WAIT)
    with pytest.raises(ToolError, match=r"web_search \(tavily\): .*excessive requests.*HTTP 429"):
        await search.search("anything")
    assert len(sent) == 3


async def test_a_bad_key_is_not_retried_and_says_so():
    transport, sent = replay("perplexity_bad_key")
    search = PerplexitySearch(api_key="wrong", transport=transport, retry=NO_WAIT)
    with pytest.raises(ToolError, match=r"Invalid API key provided.*HTTP 401"):
        await search.search("anything")
    assert len(sent) == 1


async def test_a_search_service_that_never_answers_times_out():
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    search = TavilySearch(api_key="k", transport=httpx.MockTransport(hang),
                          retry=RetryPolicy(attempts=2, sleep=lambda s: _no_sleep()),
                          timeout=0.5)
    with pytest.raises(ToolError, match=r"tavily.*request timed out: no answer within 0.5 s"):
        await search.search("anything")


def test_missing_keys_and_unknown_back_ends_name_the_fix(monkeypatch):
    monkeypatch.delenv("PERPLEXITY_API_KEY", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(ToolError, match="set PERPLEXITY_API_KEY"):
        make_backend({"backend": "perplexity"})
    with pytest.raises(ToolError, match="set TAVILY_API_KEY"):
        make_backend({"backend": "tavily"})
    with pytest.raises(ToolError, match="unknown backend 'bing'; use one of offline, "
                                        "perplexity, tavily"):
        make_backend({"backend": "bing"})
    with pytest.raises(ToolError, match=r"unknown option\(s\) depth"):
        make_backend({"backend": "tavily", "depth": "x"}, env={"TAVILY_API_KEY": "k"})
    # one document may name both kinds: the offline options are ignored by the others
    assert make_backend({"backend": "tavily", "knowledge_base": "web"},
                        env={"TAVILY_API_KEY": "k"}).name == "tavily"


async def test_offline_search_reads_the_page_addresses(knowledge):
    search = OfflineSearch(knowledge, knowledge_base="shared/web")
    result = (await search.search("how to wash a waterproof jacket")).to_dict()
    first = result["citations"][0]
    assert first["url"] == "https://outdoor-care.example.com/waterproof-jacket-washing"
    assert first["title"] == "How to wash a waterproof jacket"
    assert "url:" not in first["snippet"]
    assert result["metadata"]["backend"] == "offline"


async def test_offline_search_of_a_missing_folder_is_a_tool_error(knowledge, tmp_path):
    search = OfflineSearch(knowledge, folder=tmp_path / "nope")
    with pytest.raises(ToolError, match="the folder .*nope does not exist"):
        await search.search("anything")


async def test_a_missing_offline_web_base_is_no_pages_found_with_the_fix(knowledge):
    """A fresh machine has no 'web' base: research failed out of the box ("no knowledge
    base named 'web'") and the chat's answer was the failed search.  Now nothing is
    found, and the answer says why and how to give it pages."""
    result = (await OfflineSearch(knowledge, knowledge_base="web").search("tents")).to_dict()
    assert result["citations"] == []
    assert "no knowledge base named 'web'" in result["answer"]
    assert "flowforge kb add web <folder>" in result["answer"]
    assert result["metadata"]["missing"] is True
