"""`anthropic/<model>` through the official SDK on an httpx2.MockTransport, answering in the
Messages API's documented wire format (JSON and server-sent events)."""

from __future__ import annotations

import genai_prices
import httpx2
import pytest

from flowforge.errors import MissingCredentials, ProviderError
from flowforge.providers import resolve
from flowforge.providers.base import LLMRequest, Message, ToolCall, ToolSpec
from flowforge.providers.call import call_model
from flowforge.providers.resolve import ProviderOptions
from flowforge.providers.retry import RetryPolicy

from .conftest import Recorder, sse

ENV = ProviderOptions(env={"ANTHROPIC_API_KEY": "sk-ant-test"})
TIME_TOOL = ToolSpec("get_time", "Current time in a timezone",
                     {"type": "object", "properties": {"timezone": {"type": "string"}},
                      "required": ["timezone"]})


def message(content, stop="end_turn", usage=None):
    return httpx2.Response(200, json={
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-6", "content": content, "stop_reason": stop,
        "stop_sequence": None, "usage": usage or {"input_tokens": 25, "output_tokens": 12}})


def api_error(status, kind, text, headers=None):
    return httpx2.Response(status, headers=headers or {},
                           json={"type": "error", "error": {"type": kind, "message": text}})


@pytest.fixture
def anthropic_via(monkeypatch, allow_model_requests):
    # imports the vendor SDK: in the test that needs it, not in every worker's collection
    from flowforge.providers import anthropic as anthropic_provider

    def install(recorder):
        monkeypatch.setitem(resolve._FACTORIES, "anthropic",
                            lambda name, options: anthropic_provider._factory(
                                name, options, http_client=recorder.client()))
        return recorder
    return install


def conversation():
    return [Message("system", "You tell the time."),
            Message("user", "Time in Paris and Tokyo?"),
            Message("assistant", "Checking.", tool_calls=[
                ToolCall("toolu_1", "get_time", {"timezone": "Europe/Paris"}),
                ToolCall("toolu_2", "get_time", {"timezone": "Asia/Tokyo"})]),
            Message("tool", "14:05", tool_call_id="toolu_1", name="get_time"),
            Message("tool", "21:05", tool_call_id="toolu_2", name="get_time")]


async def test_request_follows_the_messages_api(anthropic_via):
    recorder = anthropic_via(Recorder(message([{"type": "text", "text": "14:05 and 21:05."}])))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}},
              "required": ["answer"]}
    response = await call_model("anthropic/claude-sonnet-4-6", LLMRequest(
        model="", messages=conversation(), tools=[TIME_TOOL], tool_choice="required",
        temperature=0.3, response_format=schema, stop=["END"]), options=ENV)
    sent = recorder.body()
    request = recorder.requests[0]
    assert request.url.path == "/v1/messages"
    assert "sk-ant-test" in (request.headers.get("x-api-key", "") +
                             request.headers.get("authorization", ""))
    assert sent["model"] == "claude-sonnet-4-6" and sent["max_tokens"] == 4096
    assert sent["system"] == "You tell the time."
    assert [t["role"] for t in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_time",
         "input": {"timezone": "Europe/Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_time",
         "input": {"timezone": "Asia/Tokyo"}}]
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "14:05"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "21:05"}]
    assert sent["tools"] == [{"name": "get_time", "description": "Current time in a timezone",
                              "input_schema": TIME_TOOL.parameters}]
    assert sent["tool_choice"] == {"type": "any"}
    assert sent["output_config"]["format"] == {
        "type": "json_schema", "schema": {**schema, "additionalProperties": False}}
    assert sent["stop_sequences"] == ["END"]
    assert "temperature" not in sent     # API 2026-10-21 rejects sampling parameters
    assert response.text == "14:05 and 21:05." and response.finish_reason == "stop"


async def test_tool_use_answer_usage_and_cost(anthropic_via):
    anthropic_via(Recorder(message(
        [{"type": "text", "text": "Let me check."},
         {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_time",
          "input": {"timezone": "Europe/Paris"}}], stop="tool_use",
        usage={"input_tokens": 400, "output_tokens": 60, "cache_read_input_tokens": 100})))
    response = await call_model("anthropic/claude-sonnet-4-6", LLMRequest(
        model="", messages=[Message("user", "Time in Paris?")], tools=[TIME_TOOL]), options=ENV)
    assert response.tool_calls[0].to_dict() == {"id": "toolu_01A09q90qw90lq917835lq9",
                                                "name": "get_time",
                                                "arguments": {"timezone": "Europe/Paris"}}
    assert response.text == "Let me check." and response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (500, 60)
    price = genai_prices.calc_price(genai_prices.Usage(input_tokens=500, output_tokens=60),
                                    "claude-sonnet-4-6", provider_id="anthropic")
    assert response.cost == pytest.approx(float(price.total_price)) and response.cost > 0


async def test_streaming_text_and_tool_input(anthropic_via):
    anthropic_via(Recorder(sse(
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-6", "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 30, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Checking"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": " now."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_9", "name": "get_time", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": "{\"timezone\": \"Eur"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": "ope/Paris\"}"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                              "stop_sequence": None},
                           "usage": {"output_tokens": 21}}),
        ("message_stop", {"type": "message_stop"}))))
    deltas: list[str] = []
    response = await call_model("anthropic/claude-sonnet-4-6", LLMRequest(
        model="", messages=[Message("user", "Time?")], tools=[TIME_TOOL], stream=True),
        options=ENV, on_delta=deltas.append)
    assert deltas == ["Checking", " now."] and response.text == "Checking now."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_9", "get_time", {"timezone": "Europe/Paris"})]
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (30, 21)
    assert response.finish_reason == "tool_calls"


async def test_rate_limit_and_overload_are_retried_validation_is_not(anthropic_via):
    recorder = anthropic_via(Recorder(
        api_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit",
                  {"retry-after": "2"}),
        api_error(529, "overloaded_error", "Overloaded"),
        message([{"type": "text", "text": "ok"}]),
        api_error(400, "invalid_request_error", "max_tokens: Field required")))
    sleeps: list[float] = []

    async def sleep(delay):
        sleeps.append(delay)

    retry = RetryPolicy(attempts=3, sleep=sleep)
    ok = await call_model("anthropic/claude-sonnet-4-6", LLMRequest(
        model="", messages=[Message("user", "hi")]), options=ENV, retry=retry)
    assert ok.text == "ok" and sleeps[0] == 2.0 and len(sleeps) == 2
    with pytest.raises(ProviderError) as caught:
        await call_model("anthropic/claude-sonnet-4-6", LLMRequest(
            model="", messages=[Message("user", "hi")]), options=ENV, retry=retry)
    assert caught.value.status == 400 and "max_tokens: Field required" in str(caught.value)
    assert len(recorder.requests) == 4 and len(sleeps) == 2


async def test_missing_key_and_disabled_requests():
    with pytest.raises(MissingCredentials, match="ANTHROPIC_API_KEY"):
        await call_model("anthropic/claude-sonnet-4-6",
                         LLMRequest(model="", messages=[Message("user", "hi")]))
    with pytest.raises(ProviderError, match="model requests are disabled"):
        await call_model("anthropic/claude-sonnet-4-6",
                         LLMRequest(model="", messages=[Message("user", "hi")]), options=ENV)
