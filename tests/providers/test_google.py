"""`google/<model>` through the official google-genai SDK on an httpx2.MockTransport,
answering in the Gemini API's documented wire format (JSON and server-sent events)."""

from __future__ import annotations

import base64

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

ENV = ProviderOptions(env={"GEMINI_API_KEY": "gm-test"})
TIME_TOOL = ToolSpec("get_time", "Current time in a timezone",
                     {"type": "object", "properties": {"timezone": {"type": "string"}},
                      "required": ["timezone"]})
SIGNATURE = base64.b64encode(b"\x12\x34opaque-reasoning-state").decode()


def generated(parts, finish="STOP", usage=None, model="gemini-2.5-flash"):
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": finish, "index": 0}],
            "usageMetadata": usage or {"promptTokenCount": 15, "candidatesTokenCount": 6,
                                       "totalTokenCount": 21},
            "modelVersion": model, "responseId": "Il0taoSYJ5Cez7"}


def api_error(code, status, message, headers=None):
    return httpx2.Response(code, headers=headers or {},
                           json={"error": {"code": code, "message": message, "status": status}})


@pytest.fixture
def google_via(monkeypatch, allow_model_requests):
    # imports the vendor SDK: in the test that needs it, not in every worker's collection
    from flowforge.providers import google as google_provider

    def install(recorder):
        monkeypatch.setitem(resolve._FACTORIES, "google",
                            lambda name, options: google_provider._factory(
                                name, options, http_client=recorder.client()))
        return recorder
    return install


async def test_request_follows_generate_content(google_via):
    recorder = google_via(Recorder(httpx2.Response(200, json=generated(
        [{"text": "It is 14:05 in Paris."}]))))
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    messages = [Message("system", "You tell the time."), Message("user", "Time in Paris?"),
                Message("assistant", tool_calls=[ToolCall("c1", "get_time",
                                                          {"timezone": "Europe/Paris"},
                                                          {"thought_signature": SIGNATURE})]),
                Message("tool", "14:05", tool_call_id="c1", name="get_time")]
    response = await call_model("google/gemini-2.5-flash", LLMRequest(
        model="", messages=messages, tools=[TIME_TOOL], tool_choice="get_time",
        temperature=0.1, max_tokens=50, response_format=schema), options=ENV)
    request = recorder.requests[0]
    sent = recorder.body()
    assert request.url.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert request.headers["x-goog-api-key"] == "gm-test"
    assert sent["systemInstruction"]["parts"] == [{"text": "You tell the time."}]
    assert [c["role"] for c in sent["contents"]] == ["user", "model", "user"]
    call_part = sent["contents"][1]["parts"][0]
    assert call_part["functionCall"]["name"] == "get_time"
    assert call_part["functionCall"]["args"] == {"timezone": "Europe/Paris"}
    assert base64.urlsafe_b64decode(call_part["thoughtSignature"] + "==") == \
        base64.b64decode(SIGNATURE)
    assert sent["contents"][2]["parts"][0]["functionResponse"]["name"] == "get_time"
    assert sent["contents"][2]["parts"][0]["functionResponse"]["response"] == {"result": "14:05"}
    declaration = sent["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "get_time" and declaration["description"]
    mode = sent["toolConfig"]["functionCallingConfig"]
    assert mode["mode"] == "ANY" and mode["allowedFunctionNames"] == ["get_time"]
    config = sent["generationConfig"]
    assert config["temperature"] == 0.1 and config["maxOutputTokens"] == 50
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == schema
    assert response.text == "It is 14:05 in Paris." and response.finish_reason == "stop"


async def test_function_call_answer_keeps_its_signature_usage_and_cost(google_via):
    google_via(Recorder(httpx2.Response(200, json=generated(
        [{"functionCall": {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
          "thoughtSignature": SIGNATURE}],
        usage={"promptTokenCount": 1000, "candidatesTokenCount": 40,
               "thoughtsTokenCount": 60, "totalTokenCount": 1100}))))
    response = await call_model("google/gemini-2.5-flash", LLMRequest(
        model="", messages=[Message("user", "Time in Tokyo?")], tools=[TIME_TOOL]), options=ENV)
    call = response.tool_calls[0]
    assert (call.name, call.arguments) == ("get_time", {"timezone": "Asia/Tokyo"})
    assert call.meta == {"thought_signature": SIGNATURE}
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (1000, 100)
    price = genai_prices.calc_price(genai_prices.Usage(input_tokens=1000, output_tokens=100),
                                    "gemini-2.5-flash", provider_id="google")
    assert response.cost == pytest.approx(float(price.total_price)) and response.cost > 0


async def test_an_unsigned_call_gets_the_sentinel_on_gemini_3(google_via):
    recorder = google_via(Recorder(httpx2.Response(200, json=generated([{"text": "ok"}]))))
    messages = [Message("user", "Time?"),
                Message("assistant", tool_calls=[ToolCall("c1", "get_time", {"timezone": "UTC"})]),
                Message("tool", "10:00", tool_call_id="c1")]
    await call_model("google/gemini-3-flash", LLMRequest(model="", messages=messages,
                                                         tools=[TIME_TOOL]), options=ENV)
    sent = recorder.body()
    assert sent["contents"][1]["parts"][0]["thoughtSignature"] == \
        "skip_thought_signature_validator"
    assert sent["contents"][2]["parts"][0]["functionResponse"]["name"] == "get_time"


async def test_streaming_text(google_via):
    google_via(Recorder(sse(
        (None, {"candidates": [{"content": {"role": "model", "parts": [{"text": "Four"}]},
                                "index": 0}], "modelVersion": "gemini-2.5-flash"}),
        (None, {"candidates": [{"content": {"role": "model", "parts": [{"text": "teen."}]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 3,
                                  "totalTokenCount": 11},
                "modelVersion": "gemini-2.5-flash"}))))
    deltas: list[str] = []
    response = await call_model("google/gemini-2.5-flash", LLMRequest(
        model="", messages=[Message("user", "7+7?")], stream=True), options=ENV,
        on_delta=deltas.append)
    assert deltas == ["Four", "teen."] and response.text == "Fourteen."
    assert response.usage.total_tokens == 11 and response.finish_reason == "stop"


async def test_resource_exhausted_is_retried_invalid_argument_is_not(google_via):
    recorder = google_via(Recorder(
        api_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted",
                  {"retry-after": "1"}),
        api_error(503, "UNAVAILABLE", "The model is overloaded."),
        httpx2.Response(200, json=generated([{"text": "ok"}])),
        api_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")))
    sleeps: list[float] = []

    async def sleep(delay):
        sleeps.append(delay)

    retry = RetryPolicy(sleep=sleep)
    ok = await call_model("google/gemini-2.5-flash", LLMRequest(
        model="", messages=[Message("user", "hi")]), options=ENV, retry=retry)
    assert ok.text == "ok" and sleeps[0] == 1.0 and len(sleeps) == 2
    with pytest.raises(ProviderError) as caught:
        await call_model("google/gemini-2.5-flash", LLMRequest(
            model="", messages=[Message("user", "hi")]), options=ENV, retry=retry)
    assert caught.value.status == 400 and "Invalid JSON payload" in str(caught.value)
    assert len(recorder.requests) == 4


async def test_either_key_variable_works_and_a_missing_one_is_named(google_via):
    recorder = google_via(Recorder(httpx2.Response(200, json=generated([{"text": "ok"}]))))
    await call_model("google/gemini-2.5-flash", LLMRequest(
        model="", messages=[Message("user", "hi")]),
        options=ProviderOptions(env={"GOOGLE_API_KEY": "alt-key"}))
    assert recorder.requests[0].headers["x-goog-api-key"] == "alt-key"
    with pytest.raises(MissingCredentials, match="GEMINI_API_KEY"):
        await call_model("google/gemini-2.5-flash",
                         LLMRequest(model="", messages=[Message("user", "hi")]))
