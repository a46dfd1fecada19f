"""`replicate/<owner>/<model>` against recorded exchanges of Replicate's predictions
API (create, poll, cancel), replayed by an httpx.MockTransport that checks every
request it is sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import flowforge
from flowforge.errors import MissingCredentials, ProviderError
from flowforge.providers import resolve
from flowforge.providers import replicate as replicate_provider
from flowforge.providers.base import LLMRequest, Message, ToolSpec
from flowforge.providers.resolve import ProviderOptions, resolve_model

RECORDED = Path(__file__).parent / "recorded"
ENV = ProviderOptions(env={"REPLICATE_API_TOKEN": "r8_test_token"})
PREDICTION_ID = "gm3r4kq7t9rma0cqjzyr8c2v3m"


class Replay:
    """Answers requests from a list of exchanges in order, checking method, path and
    JSON body of each, then from `routes` ((method, path) -> response) for as long
    as asked; `calls` keeps what was sent."""

    def __init__(self, exchanges: list[dict[str, Any]],
                 routes: dict[tuple[str, str], dict] | None = None) -> None:
        self.exchanges = list(exchanges)
        self.routes = routes or {}
        self.calls: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        if self.exchanges:
            exchange = self.exchanges.pop(0)
            expected = exchange["request"]
            assert (request.method, request.url.path) == (expected["method"],
                                                          expected["path"])
            if "json" in expected:
                assert json.loads(request.content) == expected["json"]
            answer = exchange["response"]
        else:
            answer = self.routes.get((request.method, request.url.path))
            if answer is None:
                raise AssertionError(f"unexpected request {request.method} {request.url}")
        return httpx.Response(answer["status"], json=answer.get("json"),
                              headers=answer.get("headers"))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def recorded(name: str) -> list[dict[str, Any]]:
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))["exchanges"]


@pytest.fixture
def replicate_via(monkeypatch, allow_model_requests):
    def install(replay: Replay) -> Replay:
        monkeypatch.setitem(resolve._FACTORIES, "replicate",
                            lambda name, options: replicate_provider._factory(
                                name, options, http_client=replay.client()))
        return replay
    return install


def request(model: str = "google-deepmind/gemma-3-27b-it", **extra: Any) -> LLMRequest:
    return LLMRequest(model=model, messages=[Message("system", "You are a poet."),
                                             Message("user", "Write one line about tides.")],
                      max_tokens=64, temperature=0.7, extra={"poll_interval": 0, **extra})


def prediction(status: str, **fields: Any) -> dict[str, Any]:
    return {"id": PREDICTION_ID, "model": "meta/meta-llama-3-8b-instruct", "status": status,
            "output": None, "error": None, "logs": "", **fields}


async def test_create_poll_and_join_the_output(replicate_via):
    replay = replicate_via(Replay(recorded("replicate_gemma.json")))
    provider, name = resolve_model("replicate/google-deepmind/gemma-3-27b-it", ENV)
    response = await provider.complete(request(name))
    assert response.text == "The sea breathes twice a day."
    assert response.usage.to_dict() == {"prompt": 17, "completion": 8, "total": 25}
    assert response.model == "replicate/google-deepmind/gemma-3-27b-it"
    assert [c.headers["authorization"] for c in replay.calls] == ["Bearer r8_test_token"] * 3


async def test_a_pinned_version_and_a_conversation(replicate_via):
    version = "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa"
    created = prediction("succeeded", output="Paris.")
    replay = replicate_via(Replay([{
        "request": {"method": "POST", "path": "/v1/predictions", "json": {
            "version": version,
            "input": {"prompt": "User: Capital of France?\n\nAssistant: Paris.\n\nUser: "
                                "And again?\n\nAssistant:", "top_p": 0.9}}},
        "response": {"status": 201, "json": created}}]))
    provider, name = resolve_model(f"replicate/meta/meta-llama-3-8b-instruct:{version}", ENV)
    response = await provider.complete(LLMRequest(
        model=name, messages=[Message("user", "Capital of France?"),
                              Message("assistant", "Paris."), Message("user", "And again?")],
        extra={"poll_interval": 0, "input": {"top_p": 0.9}}))
    assert response.text == "Paris." and len(replay.calls) == 1


async def test_a_failed_prediction_says_why(replicate_via):
    replicate_via(Replay([
        {"request": {"method": "POST",
                     "path": "/v1/models/google-deepmind/gemma-3-27b-it/predictions"},
         "response": {"status": 201, "json": prediction("starting")}},
        {"request": {"method": "GET", "path": f"/v1/predictions/{PREDICTION_ID}"},
         "response": {"status": 200, "json": prediction(
             "failed", error="CUDA out of memory. Tried to allocate 2.00 GiB")}}]))
    provider, name = resolve_model("replicate/google-deepmind/gemma-3-27b-it", ENV)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request(name))
    assert str(caught.value) == ("replicate: the prediction failed: CUDA out of memory. "
                                 "Tried to allocate 2.00 GiB")
    assert not caught.value.retryable


@pytest.mark.parametrize("status, body, message, retryable", [
    (401, {"title": "Unauthenticated", "detail": "You did not pass a valid authentication token",
           "status": 401},
     "replicate: You did not pass a valid authentication token - check REPLICATE_API_TOKEN "
     "(HTTP 401)", False),
    (422, {"title": "Input validation failed", "status": 422,
           "detail": "- input.temperature: Must be less than or equal to 5"},
     "replicate: - input.temperature: Must be less than or equal to 5 (HTTP 422)", False),
    (429, {"title": "Request was throttled", "status": 429,
           "detail": "Request was throttled. Your rate limit resets in ~1s."},
     "replicate: Request was throttled. Your rate limit resets in ~1s. (HTTP 429)", True),
])
async def test_http_errors_are_classified(replicate_via, status, body, message, retryable):
    replicate_via(Replay([{"request": {"method": "POST", "path":
                                       "/v1/models/google-deepmind/gemma-3-27b-it/predictions"},
                           "response": {"status": status, "json": body,
                                        "headers": {"Retry-After": "1"}}}]))
    provider, name = resolve_model("replicate/google-deepmind/gemma-3-27b-it", ENV)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request(name))
    assert str(caught.value) == message
    assert (caught.value.status, caught.value.retryable) == (status, retryable)


async def test_cancelling_the_call_cancels_the_prediction(replicate_via):
    replay = replicate_via(Replay(
        [{"request": {"method": "POST",
                      "path": "/v1/models/google-deepmind/gemma-3-27b-it/predictions"},
          "response": {"status": 201, "json": prediction("starting")}}],
        routes={("GET", f"/v1/predictions/{PREDICTION_ID}"):
                {"status": 200, "json": prediction("processing")},
                ("POST", f"/v1/predictions/{PREDICTION_ID}/cancel"):
                {"status": 200, "json": prediction("canceled")}}))
    provider, name = resolve_model("replicate/google-deepmind/gemma-3-27b-it", ENV)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(provider.complete(request(name, poll_interval=0.01)), 0.3)
    sent = [(c.method, c.url.path) for c in replay.calls]
    assert sent[0][0] == "POST" and sent[1:-1] and \
        set(sent[1:-1]) == {("GET", f"/v1/predictions/{PREDICTION_ID}")}
    assert sent[-1] == ("POST", f"/v1/predictions/{PREDICTION_ID}/cancel")


async def test_tools_are_refused_and_the_token_is_required(replicate_via):
    replicate_via(Replay([]))
    provider, name = resolve_model("replicate/google-deepmind/gemma-3-27b-it", ENV)
    with pytest.raises(ProviderError, match="tools are not supported by replicate"):
        await provider.complete(LLMRequest(model=name, messages=[Message("user", "hi")],
                                           tools=[ToolSpec("t", "a tool")]))
    resolve.clear_provider_cache()
    with pytest.raises(MissingCredentials, match="REPLICATE_API_TOKEN"):
        resolve_model("replicate/google-deepmind/gemma-3-27b-it", ProviderOptions(env={}))


async def test_a_chain_node_with_llm_replicate_sends_its_api_key(replicate_via):
    """The seed's example: `llm: replicate`, `apikey: {replicateAPI}` from the variables."""
    from flowforge.apps.chains import split_variables, workflow_data_if_agent
    from flowforge.service.loading import load

    done = prediction("succeeded", output=["A", " synopsis."],
                      metrics={"input_token_count": 9, "output_token_count": 2})
    replay = replicate_via(Replay([
        {"request": {"method": "POST",
                     "path": "/v1/models/google-deepmind/gemma-3-27b-it/predictions",
                     "json": {"input": {
                         "prompt": "Write a nice story",
                         "system_prompt": "You are a story development expert creating a "
                                          "synopsis for a Science fiction film",
                         "max_tokens": 2000, "max_new_tokens": 2000, "temperature": 1}}},
         "response": {"status": 201, "json": done}}]))
    workflow = load(workflow_data_if_agent({
        "name": "My agent",
        "variables": {"replicateAPI": "", "genre": "Science fiction", "prompt": "", "context": ""},
        "promptChain": [
            {"type": "prompt", "name": "Sypnosis",
             "system": "You are a story development expert creating a synopsis for a {genre} film",
             "user": "{prompt}", "apikey": "{replicateAPI}", "llm": "replicate",
             "model": "google-deepmind/gemma-3-27b-it", "temperature": 1, "maxTokens": 2000,
             "output": "context"},
            {"name": "Return", "type": "return", "output": "context"}]}))
    inputs, secrets = split_variables(workflow, {"replicateAPI": "r8_from_the_variables",
                                                 "prompt": "Write a nice story"})
    result = await flowforge.run(workflow, inputs, run_secrets=secrets, storage=False)
    assert result.status == "succeeded", result.error
    assert result.outputs["return"]["data"] == {"context": "A synopsis."}
    assert replay.calls[0].headers["authorization"] == "Bearer r8_from_the_variables"
    assert "r8_from_the_variables" not in json.dumps(result.to_dict(), default=str)
