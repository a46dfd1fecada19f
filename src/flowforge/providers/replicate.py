"""`replicate/<owner>/<model>` (or `replicate/<owner>/<model>:<version>`):
language models on Replicate, through its predictions API over httpx.

    create   POST /v1/models/{owner}/{model}/predictions  {"input": {...}}
             POST /v1/predictions  {"version": "<id>", "input": {...}}   (a pinned version)
    poll     GET  /v1/predictions/{id}   until succeeded | failed | canceled
    cancel   POST /v1/predictions/{id}/cancel   when the block is cancelled or times out

The key comes from `REPLICATE_API_TOKEN` (a prompt-chain node's `apiKey`
arrives there for that node only); `REPLICATE_BASE_URL` points elsewhere (a
proxy, a test server).  The chat request becomes the model's inputs:
`prompt` (the conversation; a single user message as it is), `system_prompt`,
`max_tokens` and `max_new_tokens` (models name it either way; Replicate
ignores inputs a model does not take), `temperature`; provider option
`input: {...}` adds or replaces inputs for models that want others
(`top_p`, `min_tokens`, ...).  A language model's output is a list of text
fragments, joined; token counts come from the prediction's `metrics`.
Tools are not supported; a JSON-Schema response format is asked for in the
system prompt (Replicate has no constrained decoding), and the answer is
checked by the block as usual.  Polling starts at `poll_interval` seconds
(provider option, default 0.5) and grows to 2 s.  With `stream`, the text
arrives as one delta when the prediction ends (Replicate's event stream is
not read yet).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Mapping

import httpx

from flowforge.errors import ProviderError
from flowforge.providers.base import (DeltaCallback, LLMRequest, LLMResponse, Provider, Timing,
                                      Usage, check_model_requests_allowed, is_loopback_url,
                                      require)
from flowforge.providers.resolve import ProviderOptions, register_provider
from flowforge.providers.retry import (connection_error, error_from_status, timeout_error,
                                       unusable_answer)
from flowforge.tls import verified_context

__all__ = ["ReplicateProvider", "DEFAULT_BASE_URL"]

DEFAULT_BASE_URL = "https://api.replicate.com/v1"
_DONE = ("succeeded", "failed", "canceled")
_NAME = "replicate"


class ReplicateProvider(Provider):
    """One token and base URL; one connection pool, reused across requests."""

    name = _NAME
    sent_options = ()       # a model's own knobs go in `extra.input`, under its names

    def __init__(self, token: str, base_url: str = DEFAULT_BASE_URL,
                 http_client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.remote = not is_loopback_url(self.base_url)
        self.client = http_client or httpx.AsyncClient(timeout=httpx.Timeout(60.0),
                                                          verify=verified_context())
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        if request.tools:
            raise ProviderError("tools are not supported by replicate (its language models "
                                "take a prompt): use a block without tools, or another "
                                "provider", provider=_NAME)
        if self.remote:
            check_model_requests_allowed(_NAME)
        started = time.time()
        model, _, version = request.model.partition(":")
        body: dict[str, Any] = {"input": self._inputs(request)}
        if version:
            body["version"] = version
            url = f"{self.base_url}/predictions"
        else:
            if model.count("/") != 1:
                raise ProviderError(f"model '{request.model}' is not '<owner>/<model>' (or "
                                    f"'<owner>/<model>:<version>')", provider=_NAME)
            url = f"{self.base_url}/models/{model}/predictions"
        prediction = await self._send("POST", url, body)
        prediction_id = prediction.get("id")
        if not isinstance(prediction_id, str) or not prediction_id:
            raise unusable_answer(_NAME, "the created prediction has no id")
        try:
            prediction = await self._wait(prediction, float(
                request.extra.get("poll_interval", 0.5)))
        except asyncio.CancelledError:
            # cancelled (the block, the run, a timeout): stop paying for the prediction
            await asyncio.shield(self._cancel(prediction_id))
            raise
        text = _text(prediction.get("output"))
        if request.stream and on_delta is not None and text:
            on_delta(text)
        metrics = prediction.get("metrics") if isinstance(prediction.get("metrics"), dict) \
            else {}
        usage = Usage(int(metrics.get("input_token_count") or 0),
                      int(metrics.get("output_token_count") or 0))
        return LLMResponse(text=text, usage=usage, model=f"{_NAME}/{request.model}",
                           finish_reason="stop", timing=Timing(started, time.time()),
                           raw={"id": prediction_id, "status": prediction.get("status")})

    def _inputs(self, request: LLMRequest) -> dict[str, Any]:
        system = [m.content or "" for m in request.messages if m.role == "system"]
        turns = [m for m in request.messages if m.role != "system"]
        if len(turns) == 1 and turns[0].role == "user":
            prompt = turns[0].content or ""
        else:
            prompt = "\n\n".join(f"{m.role.capitalize()}: {m.content or ''}" for m in turns)
            prompt += "\n\nAssistant:"
        if request.response_format:
            system.append("Answer with only a JSON value matching this JSON Schema, no other "
                          f"text: {json.dumps(request.response_format, ensure_ascii=False)}")
        inputs: dict[str, Any] = {"prompt": prompt}
        if system:
            inputs["system_prompt"] = "\n\n".join(system)
        if request.max_tokens is not None:
            inputs["max_tokens"] = inputs["max_new_tokens"] = request.max_tokens
        if request.temperature is not None:
            inputs["temperature"] = request.temperature
        if request.stop:
            inputs["stop_sequences"] = ",".join(request.stop)
        extra = request.extra.get("input")
        if isinstance(extra, Mapping):
            inputs.update(extra)
        return inputs

    async def _wait(self, prediction: dict[str, Any], interval: float) -> dict[str, Any]:
        delay = max(interval, 0.0)
        while prediction.get("status") not in _DONE:
            await asyncio.sleep(delay)
            delay = min(max(delay * 1.5, 0.05), 2.0) if delay else 0.0
            prediction = await self._send(
                "GET", f"{self.base_url}/predictions/{prediction['id']}", None)
        status = prediction["status"]
        if status == "failed":
            reason = prediction.get("error") or "no reason given"
            raise ProviderError(f"the prediction failed: {reason}", provider=_NAME)
        if status == "canceled":
            raise ProviderError("the prediction was canceled on Replicate", provider=_NAME)
        return prediction

    async def _cancel(self, prediction_id: str) -> None:
        try:
            await self.client.post(f"{self.base_url}/predictions/{prediction_id}/cancel",
                                   headers=self.headers, timeout=10.0)
        except httpx.HTTPError:
            pass                    # best effort: the prediction ends by itself anyway

    async def _send(self, method: str, url: str, body: Any) -> dict[str, Any]:
        try:
            response = await self.client.request(method, url, headers=self.headers,
                                                 json=body)
        except httpx.TimeoutException as exc:
            raise timeout_error(_NAME, str(exc) or type(exc).__name__) from None
        except httpx.HTTPError as exc:
            raise connection_error(_NAME, str(exc) or type(exc).__name__) from None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400:
            raise error_from_status(_NAME, response.status_code, _problem(response, data),
                                    response.headers)
        if not isinstance(data, dict):
            raise unusable_answer(_NAME, f"expected a prediction object, got "
                                         f"{response.text[:200]!r}")
        return data

    async def aclose(self) -> None:
        await self.client.aclose()


def _problem(response: httpx.Response, data: Any) -> str:
    """Replicate's errors are problem details: `{"title", "detail", "status"}`."""
    if isinstance(data, dict):
        detail = data.get("detail") or data.get("title") or data.get("error")
        if detail:
            text = str(detail)
            if response.status_code == 401:
                text += " - check REPLICATE_API_TOKEN"
            return text
    return response.text[:300] or response.reason_phrase


def _text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(isinstance(part, str) for part in output):
        return "".join(output)
    return json.dumps(output, ensure_ascii=False)


def _factory(name: str, options: ProviderOptions,
             http_client: httpx.AsyncClient | None = None) -> tuple[Provider, str]:
    env = options.env
    token = require(env, _NAME, "REPLICATE_API_TOKEN")
    base_url = env.get("REPLICATE_BASE_URL") or DEFAULT_BASE_URL
    return ReplicateProvider(token, base_url, http_client), name


register_provider(_NAME, _factory)
