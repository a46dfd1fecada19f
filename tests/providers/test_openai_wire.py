"""What the `openai` provider sends to OpenAI itself (MockTransport): the Chat Completions
wire format, OpenAI-only parameter names, and how a streamed tool call is reassembled."""

from __future__ import annotations

import json

import pytest

from flowforge.providers import resolve
from flowforge.providers.base import LLMRequest, Message, ToolCall, ToolSpec
from flowforge.providers.call import call_model
from flowforge.providers.resolve import ProviderOptions

from .conftest import Recorder, sse
from .test_call import completion

ENV = ProviderOptions(env={"OPENAI_API_KEY": "sk-test"})
TIME_TOOL = ToolSpec("get_time", "Current time in a timezone",
                     {"type": "object", "properties": {"timezone": {"type": "string"}}})


@pytest.fixture
def openai_via(monkeypatch, allow_model_requests):
    # imports the vendor SDK: in the test that needs it, not in every worker's collection
    from flowforge.providers import openai as openai_provider

    def install(recorder):
        monkeypatch.setitem(resolve._FACTORIES, "openai",
                            lambda name, options: openai_provider._factory(
                                name, options, http_client=recorder.client()))
        return recorder
    return install


async def test_chat_completions_request(openai_via):
    recorder = openai_via(Recorder(completion()))
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    messages = [Message("system", "Be brief."), Message("user", "Time?"),
                Message("assistant",
                        tool_calls=[ToolCall("call_1", "get_time", {"timezone": "UTC"})]),
                Message("tool", "10:00", tool_call_id="call_1", name="get_time")]
    await call_model("openai/gpt-4o", LLMRequest(
        model="", messages=messages, tools=[TIME_TOOL], tool_choice="get_time",
        temperature=0.2, max_tokens=50, response_format=schema, extra={"seed": 7}), options=ENV)
    sent = recorder.body()
    assert sent["model"] == "gpt-4o" and sent["temperature"] == 0.2 and sent["seed"] == 7
    assert sent["max_completion_tokens"] == 50 and "max_tokens" not in sent
    assert sent["messages"][2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_time", "arguments": json.dumps({"timezone": "UTC"})}}]}
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "10:00"}
    assert sent["tools"][0] == {"type": "function", "function": {
        "name": "get_time", "description": TIME_TOOL.description,
        "parameters": TIME_TOOL.parameters}}
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": schema, "strict": False}}


async def test_reasoning_models_get_no_temperature(openai_via):
    recorder = openai_via(Recorder(completion()))
    await call_model("openai/gpt-5-mini", LLMRequest(
        model="", messages=[Message("user", "hi")], temperature=0), options=ENV)
    assert "temperature" not in recorder.body()


async def test_streamed_tool_call_fragments_are_joined(openai_via):
    def chunk(delta, finish=None, usage=None):
        return (None, {"id": "c", "object": "chat.completion.chunk", "created": 1,
                       "model": "gpt-4o", "usage": usage,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                       if delta is not None else []})
    recorder = openai_via(Recorder(sse(
        chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_9", "type": "function",
             "function": {"name": "get_time", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"timezone\": "}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "\"UTC\"}"}}]}),
        chunk({}, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}))))
    response = await call_model("openai/gpt-4o", LLMRequest(
        model="", messages=[Message("user", "Time?")], tools=[TIME_TOOL], stream=True),
        options=ENV, on_delta=lambda text: None)
    assert recorder.body()["stream_options"] == {"include_usage": True}
    assert [c.to_dict() for c in response.tool_calls] == [
        {"id": "call_9", "name": "get_time", "arguments": {"timezone": "UTC"}}]
    assert response.usage.total_tokens == 29 and response.finish_reason == "tool_calls"


async def test_a_tool_name_repeated_in_every_chunk_is_one_name(openai_via):
    """llama.cpp's server sends the whole function name in every streamed chunk."""
    def chunk(delta, finish=None):
        return (None, {"id": "c", "object": "chat.completion.chunk", "created": 1,
                       "model": "gpt-4o", "usage": None,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    openai_via(Recorder(sse(
        chunk({"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "get_time", "arguments": "{\"timezone\": "}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "get_time", "arguments": "\"UTC\"}"}}]}),
        chunk({}, finish="tool_calls"))))
    response = await call_model("openai/gpt-4o", LLMRequest(
        model="", messages=[Message("user", "Time?")], tools=[TIME_TOOL], stream=True),
        options=ENV, on_delta=lambda text: None)
    assert [c.to_dict() for c in response.tool_calls] == [
        {"id": "call_1", "name": "get_time", "arguments": {"timezone": "UTC"}}]
