"""`call_model`: retries (429 with Retry-After, 5xx, timeouts, connection errors), never on a
4xx validation error, fallback models in order, cost, streaming; exercised through the real
OpenAI SDK on a MockTransport and through small in-test providers."""

from __future__ import annotations

import asyncio
import email.utils
import time

import genai_prices
import httpx2
import pytest

from flowforge.errors import MissingCredentials, ProviderError
from flowforge.providers import resolve
from flowforge.providers.base import LLMRequest, LLMResponse, Message, Provider, Usage
from flowforge.providers.call import call_model
from flowforge.providers.resolve import ProviderOptions
from flowforge.providers.retry import RetryPolicy, retry_after_seconds

from .conftest import Recorder

KEY = {"OPENAI_API_KEY": "sk-test"}


def completion(text="Hi", prompt=10, completion_tokens=2, model="gpt-4o-2024-08-06"):
    return httpx2.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                  "total_tokens": prompt + completion_tokens}})


def error(status, message="boom", headers=None):
    return httpx2.Response(status, headers=headers or {},
                           json={"error": {"message": message, "type": "x", "code": None}})


def raising(exc):
    def answer(request):
        raise exc("simulated", request=request)
    return answer


class Sleeps:
    def __init__(self):
        self.delays: list[float] = []

    async def __call__(self, delay):
        self.delays.append(delay)


@pytest.fixture
def openai_via(monkeypatch, allow_model_requests):
    """Route `openai/...` through the real SDK onto a MockTransport recorder."""
    # imports the vendor SDK: in the test that needs it, not in every worker's collection
    from flowforge.providers import openai as openai_provider

    def install(recorder: Recorder):
        monkeypatch.setitem(resolve._FACTORIES, "openai",
                            lambda name, options: openai_provider._factory(
                                name, options, http_client=recorder.client()))
        return recorder
    return install


def request(**kw):
    return LLMRequest(model="", messages=[Message("user", "hello")], **kw)


def policy(**kw):
    sleeps = Sleeps()
    return RetryPolicy(sleep=sleeps, **kw), sleeps


async def test_429_waits_for_retry_after_then_succeeds_and_fills_cost(openai_via):
    recorder = openai_via(Recorder(error(429, "slow down", {"retry-after": "7"}), completion()))
    retry, sleeps = policy()
    retried = []
    response = await call_model("openai/gpt-4o", request(), options=ProviderOptions(env=KEY),
                                retry=retry, on_retry=lambda *a: retried.append(a))
    assert len(recorder.requests) == 2 and sleeps.delays == [7.0]
    assert retried[0][:2] == ("openai/gpt-4o", 1) and retried[0][2].status == 429
    assert response.text == "Hi" and response.model == "openai/gpt-4o"
    expected = genai_prices.calc_price(genai_prices.Usage(input_tokens=10, output_tokens=2),
                                       "gpt-4o", provider_id="openai")
    assert response.cost == pytest.approx(float(expected.total_price)) and response.cost > 0
    assert response.cost_dict()["input"] == pytest.approx(float(expected.input_price))
    assert [a["status"] for a in response.attempts] == [429]


async def test_5xx_backs_off_exponentially_with_jitter(openai_via):
    recorder = openai_via(Recorder(error(500), error(503), completion()))
    retry, sleeps = policy(attempts=3, base_delay=1.0, multiplier=2.0, jitter=0.5)
    await call_model("openai/gpt-4o", request(), options=ProviderOptions(env=KEY), retry=retry)
    assert len(recorder.requests) == 3
    first, second = sleeps.delays
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0


def test_backoff_is_capped_and_jittered():
    retry = RetryPolicy(base_delay=1, multiplier=10, max_delay=5, jitter=0.5)
    delays = {round(retry.backoff(4), 6) for _ in range(50)}
    assert all(2.5 <= d <= 5 for d in delays) and len(delays) > 1
    assert RetryPolicy(jitter=0).backoff(2) == 1.0


async def test_a_4xx_validation_error_is_never_retried_nor_falls_back(openai_via, monkeypatch):
    recorder = openai_via(Recorder(error(400, "messages: required")))
    retry, sleeps = policy()
    with pytest.raises(ProviderError) as caught:
        await call_model("openai/gpt-4o", request(), options=ProviderOptions(env=KEY),
                         fallback=["openai/gpt-4o-mini"], retry=retry)
    assert caught.value.status == 400 and not caught.value.retryable
    assert "messages: required" in str(caught.value)
    assert len(recorder.requests) == 1 and sleeps.delays == []


async def test_timeouts_exhaust_retries_then_the_fallback_answers(openai_via):
    recorder = openai_via(Recorder(raising(httpx2.ReadTimeout), raising(httpx2.ConnectError),
                                   completion("from fallback", model="gpt-4o-mini")))
    retry, sleeps = policy(attempts=2)
    response = await call_model("openai/gpt-4o", request(), options=ProviderOptions(env=KEY),
                                fallback=["openai/gpt-4o-mini"], retry=retry)
    assert response.text == "from fallback" and response.model == "openai/gpt-4o-mini"
    assert [r_.url.path for r_ in recorder.requests] == ["/v1/chat/completions"] * 3
    assert [recorder.body(i)["model"] for i in range(3)] == ["gpt-4o", "gpt-4o", "gpt-4o-mini"]
    assert len(sleeps.delays) == 1
    assert [a["model"] for a in response.attempts] == ["openai/gpt-4o"] * 2
    assert "timed out" in response.attempts[0]["error"]


async def test_a_retry_after_longer_than_allowed_moves_on_at_once(openai_via):
    when = email.utils.formatdate(time.time() + 3600, usegmt=True)
    openai_via(Recorder(error(429, headers={"retry-after": when}), completion("second")))
    retry, sleeps = policy(max_retry_after=60)
    response = await call_model("openai/gpt-4o", request(), options=ProviderOptions(env=KEY),
                                fallback=["openai/gpt-4o-mini"], retry=retry)
    assert response.model == "openai/gpt-4o-mini" and sleeps.delays == []


async def test_when_every_model_fails_the_error_lists_each(openai_via):
    recorder = openai_via(Recorder(error(503), error(503), error(529), error(529)))
    retry, _ = policy(attempts=2)
    with pytest.raises(ProviderError) as caught:
        await call_model("openai/gpt-4o", request(), options=ProviderOptions(env=KEY),
                         fallback=["openai/gpt-4o-mini"], retry=retry)
    text = str(caught.value)
    assert "openai/gpt-4o: " in text and "(2 attempts)" in text
    assert "openai/gpt-4o-mini: " in text and caught.value.status == 529
    assert text.count("(2 attempts)") == 2 and len(recorder.requests) == 4


async def test_missing_key_names_the_variable():
    with pytest.raises(MissingCredentials) as caught:
        await call_model("openai/gpt-4o", request(), options=ProviderOptions(env={}))
    assert caught.value.variable == "OPENAI_API_KEY"
    assert "set the OPENAI_API_KEY environment variable" in str(caught.value)


async def test_hosted_apis_are_refused_while_model_requests_are_disabled():
    with pytest.raises(ProviderError, match="model requests are disabled"):
        await call_model("openai/gpt-4o", request(), options=ProviderOptions(env=KEY))


async def test_workflow_env_keys_are_not_shared_between_clients(openai_via):
    recorder = openai_via(Recorder(completion(), completion()))
    for key in ("sk-one", "sk-two"):
        await call_model("openai/gpt-4o", request(),
                         options=ProviderOptions(env={"OPENAI_API_KEY": key}))
    assert [r.headers["authorization"] for r in recorder.requests] == \
        ["Bearer sk-one", "Bearer sk-two"]


class Flaky(Provider):
    """Fails `failures` times (optionally after streaming a fragment), then answers."""

    name = "flaky"

    def __init__(self, failures, stream_first=False, delay=0.0):
        self.failures, self.stream_first, self.delay, self.calls = failures, stream_first, delay, 0

    async def complete(self, request, on_delta=None):
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.calls <= self.failures:
            if self.stream_first and on_delta:
                on_delta("partial ")
            raise ProviderError("overloaded", provider="flaky", status=503, retryable=True)
        if on_delta:
            on_delta("done")
        return LLMResponse(text="done", usage=Usage(3, 1), model=request.model)


@pytest.fixture
def flaky(monkeypatch):
    def install(provider):
        monkeypatch.setitem(resolve._FACTORIES, "flaky", lambda name, options: (provider, name))
        return provider
    return install


async def test_after_text_was_streamed_a_failure_is_retried_and_the_text_voided(flaky):
    provider = flaky(Flaky(1, stream_first=True))
    deltas: list[str] = []
    restarts: list[tuple[str, int, str]] = []
    response = await call_model(
        "flaky/x", request(stream=True), on_delta=deltas.append,
        on_restart=lambda model, number, error: restarts.append((model, number, str(error))),
        retry=RetryPolicy(sleep=Sleeps()))
    assert provider.calls == 2 and response.text == "done"
    assert deltas == ["partial ", "done"]
    assert [(m, n) for m, n, _ in restarts] == [("flaky/x", 1)]
    assert "overloaded" in restarts[0][2]


async def test_a_streamed_failure_that_cannot_succeed_again_is_not_retried(flaky):
    class BadRequest(Flaky):
        async def complete(self, request, on_delta=None):
            self.calls += 1
            on_delta("partial ")
            raise ProviderError("bad request", provider="flaky", status=400, retryable=False)
    provider = flaky(BadRequest(0))
    restarts: list = []
    with pytest.raises(ProviderError, match="bad request"):
        await call_model("flaky/x", request(stream=True), on_delta=lambda text: None,
                         on_restart=lambda *a: restarts.append(a),
                         retry=RetryPolicy(sleep=Sleeps()))
    assert provider.calls == 1 and restarts == []


async def test_per_attempt_timeout_is_retried(flaky):
    provider = flaky(Flaky(0, delay=0.2))
    with pytest.raises(ProviderError, match="no answer within 0.05 s"):
        await call_model("flaky/x", request(), retry=RetryPolicy(attempts=2, timeout=0.05,
                                                                  sleep=Sleeps()))
    assert provider.calls == 2


async def test_unpriced_models_cost_nothing(flaky):
    flaky(Flaky(0))
    response = await call_model("flaky/x", request())
    assert response.cost == 0 and response.usage.total_tokens == 4 and response.text == "done"


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = email.utils.formatdate(1000.0 + 30, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=1000.0) == pytest.approx(30, abs=1)
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds(None) is None


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError, match="at least 1"):
        RetryPolicy(attempts=0)
