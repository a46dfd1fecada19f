"""A block's own `api_key` (a template) replaces the provider key for that
block only, and is never written to the record, the events or the errors."""

from __future__ import annotations

import json

import httpx2
import pytest

import flowforge
from flowforge.errors import ValidationFailed
from flowforge.providers import base
from flowforge.providers import resolve
from flowforge.providers.resolve import clear_provider_cache, key_variables
from flowforge.storage import storage_from_url

TEAM_KEY = "sk-team-5c1e7a"


def completion(text):
    return httpx2.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})


@pytest.fixture
def openai_seen(monkeypatch):
    """`openai/...` through the real SDK onto a fake transport; yields the
    Authorization header of every request and the answer to give."""
    # imports the vendor SDK: in the test that needs it, not in every worker's collection
    from flowforge.providers import openai as openai_provider
    seen: list[str] = []
    answer = {"response": None}

    def handle(request):
        seen.append(request.headers.get("authorization", ""))
        return answer["response"] or completion("ok")

    monkeypatch.setattr(base, "ALLOW_MODEL_REQUESTS", True)
    monkeypatch.setitem(resolve._FACTORIES, "openai", lambda name, options:
                        openai_provider._factory(name, options, http_client=httpx2.AsyncClient(
                            transport=httpx2.MockTransport(handle))))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-shared-default")
    monkeypatch.setenv("TEAM_KEY", TEAM_KEY)
    clear_provider_cache()
    yield seen, answer
    clear_provider_cache()


DOC = {"id": "keys", "blocks": [
    {"id": "team", "type": "llm",
     "with": {"prompt": "hi", "model": "openai/gpt-4o", "api_key": "{{env.TEAM_KEY}}"}},
    {"id": "shared", "type": "llm", "after": ["team"],
     "with": {"prompt": "hi", "model": "openai/gpt-4o"}}]}


async def test_the_block_key_replaces_the_provider_key_for_that_block_only(openai_seen,
                                                                           tmp_path):
    seen, _ = openai_seen
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    result = await flowforge.run(DOC, {}, storage=url)
    assert result.status == "succeeded", result.error
    assert seen == [f"Bearer {TEAM_KEY}", "Bearer sk-shared-default"]
    text = json.dumps(result.to_dict(), default=str)
    assert TEAM_KEY not in text, text[max(0, text.find(TEAM_KEY) - 400):text.find(TEAM_KEY) + 50]
    async with storage_from_url(url) as store:
        stored = await store.get_run(result.run_id)
        events = await store.get_events(result.run_id)
    assert TEAM_KEY not in json.dumps([stored, events], default=str)


async def test_an_error_quoting_the_key_shows_stars(openai_seen):
    _, answer = openai_seen
    answer["response"] = httpx2.Response(401, json={"error": {
        "message": f"Incorrect API key provided: {TEAM_KEY}.", "type": "invalid_request_error",
        "code": "invalid_api_key"}})
    result = await flowforge.run(DOC, {}, storage=False)
    assert result.status == "failed"
    error = result.blocks["team"].error
    assert "Incorrect API key provided: ***" in error and TEAM_KEY not in error
    assert TEAM_KEY not in json.dumps(result.to_dict(), default=str)


def test_a_key_written_in_the_document_is_refused_with_the_fix():
    doc = {"id": "bad", "blocks": [{"id": "a", "type": "agent", "with": {
        "prompt": "hi", "api_key": "sk-live-123456"}}]}
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(doc)
    problem = caught.value.problems[0]
    assert problem.where == "blocks[0].with.api_key"
    assert "{{env.TEAM_KEY}} or {{secrets.NAME}}" in problem.message
    for kind, extra in (("router", {"prompt": "x"}), ("evaluator", {"content": "x", "metrics": [
            {"name": "a", "description": "b", "range": [0, 1]}]})):
        ok = {"id": "ok", "blocks": [{"id": "a", "type": kind, "with": {
            **extra, "api_key": "{{secrets.TEAM}}"}}]}
        if kind == "router":
            ok["blocks"].append({"id": "b", "type": "response", "after": ["a"],
                                 "with": {"message": "m"}})
        flowforge.load(ok)


def test_key_variables_name_where_each_provider_reads_its_key():
    assert key_variables("openai/gpt-4o") == ("OPENAI_API_KEY",)
    assert key_variables("google/gemini-2.5-flash") == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert key_variables("openai-compatible/my-vllm/qwen") == \
        ("OPENAI_COMPATIBLE_MY_VLLM_API_KEY",)
    assert key_variables("local/smollm2") == ()
