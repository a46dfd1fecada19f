"""The `openai` and `openai-compatible` providers against a real OpenAI-compatible server:
llama-cpp-python's own server running the embedded model on 127.0.0.1 (started once)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from flowforge.errors import MissingCredentials, ProviderError
from flowforge.providers.base import LLMRequest, Message, ToolCall, ToolSpec
from flowforge.providers.call import call_model
from flowforge.providers.resolve import ProviderOptions

TIME_TOOL = ToolSpec("get_time", "Current time in a timezone",
                     {"type": "object", "properties": {"timezone": {"type": "string",
                                                                    "maxLength": 30}},
                      "required": ["timezone"]})


def ask(text, **kw):
    kw.setdefault("max_tokens", 10)
    kw.setdefault("temperature", 0)
    return LLMRequest(model="", messages=[Message("system", "Be brief."), Message("user", text)],
                      **kw)


@pytest.fixture
def openai_env(llama_server):
    return ProviderOptions(env={"OPENAI_API_KEY": "sk-local",
                                "OPENAI_BASE_URL": llama_server.base_url})


async def test_text_and_usage_from_the_server(openai_env):
    response = await call_model("openai/smollm2", ask("Say hello."), options=openai_env)
    assert response.text and response.finish_reason in ("stop", "length")
    assert response.usage.prompt_tokens > 5 and 0 < response.usage.completion_tokens <= 10
    assert response.model == "openai/smollm2"
    assert response.raw.choices[0].message.content == response.text


async def test_streamed_fragments_add_up_to_the_answer(openai_env):
    deltas: list[str] = []
    response = await call_model("openai/smollm2", ask("Count to three.", stream=True),
                                options=openai_env, on_delta=deltas.append)
    assert len(deltas) > 1 and "".join(deltas) == response.text


async def test_a_tool_call_round_trip(openai_env):
    response = await call_model("openai/smollm2",
                                ask("What time is it in Paris?", max_tokens=30,
                                    tools=[TIME_TOOL], tool_choice="get_time"),
                                options=openai_env)
    assert [c.name for c in response.tool_calls] == ["get_time"]
    call = response.tool_calls[0]
    jsonschema.validate(call.arguments, TIME_TOOL.parameters)
    assert call.id and response.finish_reason == "tool_calls"
    # the result goes back in the Chat Completions wire format and the server accepts it
    follow = LLMRequest(model="", messages=[
        Message("user", "What time is it in Paris?"),
        Message("assistant", tool_calls=[ToolCall(call.id, call.name, call.arguments)]),
        Message("tool", "14:05", tool_call_id=call.id, name="get_time")],
        max_tokens=8, temperature=0)
    answer = await call_model("openai/smollm2", follow, options=openai_env)
    assert answer.text and not answer.tool_calls


async def test_openai_compatible_server_with_a_schema(llama_server):
    # imports the vendor SDK: in the test that needs it, not in every worker's collection
    from flowforge.providers.openai_compatible import variable_prefix

    schema = {"type": "object", "properties": {"route": {"enum": ["standard", "review"]}},
              "required": ["route"]}
    env = {variable_prefix("llama") + "BASE_URL": llama_server.base_url,
           variable_prefix("llama") + "RESPONSE_FORMAT": "json_object"}
    response = await call_model("openai-compatible/llama/smollm2",
                                ask("Pick a route.", max_tokens=20, response_format=schema),
                                options=ProviderOptions(env=env))
    jsonschema.validate(json.loads(response.text), schema)
    assert response.model == "openai-compatible/llama/smollm2" and response.cost == 0


async def test_base_url_and_model_from_the_block(llama_server):
    request = ask("Hi.", max_tokens=4, extra={"base_url": llama_server.base_url,
                                               "model": "smollm2"})
    response = await call_model("openai-compatible/mybox", request)
    assert response.text and response.usage.completion_tokens > 0


async def test_unreachable_server_is_a_retryable_connection_error(llama_server):
    from flowforge.providers.retry import RetryPolicy
    sleeps: list[float] = []

    async def sleep(delay):
        sleeps.append(delay)

    closed = "http://127.0.0.1:9/v1"   # the discard port: nothing listens
    with pytest.raises(ProviderError) as caught:
        await call_model("openai-compatible/nothing/m", ask("Hi."),
                         options=ProviderOptions(env={"OPENAI_COMPATIBLE_NOTHING_BASE_URL":
                                                      closed}),
                         retry=RetryPolicy(attempts=2, sleep=sleep))
    assert "could not connect" in str(caught.value) and len(sleeps) == 1


async def test_unknown_server_without_url_names_the_setting():
    with pytest.raises(ProviderError, match="set OPENAI_COMPATIBLE_MY_VLLM_BASE_URL"):
        await call_model("openai-compatible/my-vllm/qwen", ask("Hi."))


async def test_hosted_compatible_servers_need_their_key():
    with pytest.raises(MissingCredentials) as caught:
        await call_model("openai-compatible/openrouter/openai/gpt-4o", ask("Hi."))
    assert caught.value.variable == "OPENROUTER_API_KEY"
    with pytest.raises(ProviderError, match="AZURE_OPENAI_ENDPOINT"):
        await call_model("openai-compatible/azure/my-deployment", ask("Hi."),
                         options=ProviderOptions(env={"AZURE_OPENAI_API_KEY": "k"}))
