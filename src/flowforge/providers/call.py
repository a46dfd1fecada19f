"""The one function blocks call to reach a model: `call_model`.

    response = await call_model("openai/gpt-4o", request,
                                options=ProviderOptions(env=context.env),
                                fallback=["anthropic/claude-sonnet-4-5", "local/smollm2"],
                                retry=RetryPolicy(attempts=3),
                                on_delta=lambda text: context.emit("llm_delta", text=text))

It resolves the model string, sends the request, retries retryable failures
(see `retry`), then tries each `fallback` model in order, and fills
`response.cost` from the price table.  After it returns, `response.model` is
the full model string that answered (a fallback's, if the first failed) and
`response.attempts` lists every failed try, for the run record.

Streaming and retries: a stream cut in the middle of the answer is a
connection fault like any other - retried, then handed to the fallbacks -
because an agent that streams by default must be as reliable as one that does
not.  A consumer that already showed part of the answer is told first, through
`on_restart(model, attempt, error)`, that the answer starts again, so it can
clear what it showed instead of showing the same text twice.  A failure that is
not retryable (a bad request, a bad key) is raised as is, streamed or not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
import time
from typing import Any, Callable, Mapping, Sequence

from flowforge.errors import ProviderError
from flowforge.providers.base import DeltaCallback, LLMRequest, LLMResponse
from flowforge.providers.pricing import cost_of
from flowforge.providers.resolve import ProviderOptions, resolve_model, split_model
from flowforge.providers.retry import (RetryPolicy, dropped_connection, request_timeout,
                                       timeout_error, unusable_answer)

__all__ = ["call_model", "unsent_settings", "defaults_sent", "guided_answers", "RetryCallback", "RestartCallback", "DEFAULT_RETRY"]

DEFAULT_RETRY = RetryPolicy()

#: on_retry(model, attempt_number, error, delay_seconds) - e.g. to emit a progress event.
RetryCallback = Callable[[str, int, ProviderError, float], Any]
#: on_restart(model, attempt_number, error) - text already sent to `on_delta` is void: the
#: answer starts again (a retry or a fallback model) after a stream was cut.
RestartCallback = Callable[[str, int, ProviderError], Any]

# Environment variables a provider reads: instances are cached per distinct values of these,
# so a workflow with its own `env: {OPENAI_API_KEY: ...}` never reuses another's client.
_CONFIG_VARIABLE = re.compile(r"^(OPENAI|ANTHROPIC|GEMINI|GOOGLE|AZURE|OPENROUTER|REPLICATE|"
                              r"FLOWFORGE)")


def _cache_key(prefix: str, env: Mapping[str, str]) -> str:
    if prefix in ("scripted",):
        return ""
    digest = hashlib.sha1()
    for key in sorted(k for k in env if _CONFIG_VARIABLE.match(k)):
        digest.update(f"{key}={env[key]}\0".encode())
    return digest.hexdigest()


def _provider(model: str, options: ProviderOptions) -> tuple[Any, str]:
    prefix, _ = split_model(model)
    return resolve_model(model, options, cache_key=_cache_key(prefix, options.env))


def unsent_settings(model: str, request: LLMRequest,
                    options: ProviderOptions | None = None) -> dict[str, str]:
    """The settings of `request` that `model`'s provider cannot send, each with
    why (`Provider.unsent`): what a run's record must leave out.  Empty when
    the provider cannot be built: the call then fails with that error itself."""
    try:
        provider, name = _provider(model, options or ProviderOptions())
        return provider.unsent(dataclasses.replace(request, model=name))
    except ProviderError:
        return {}


def defaults_sent(model: str, request: LLMRequest,
                  options: ProviderOptions | None = None) -> dict[str, Any]:
    """What `model`'s provider sends for the settings `request` leaves unset
    (`Provider.defaults_sent`): what a run's record must show.  Empty when the
    provider cannot be built (the call then fails with that error itself)."""
    try:
        provider, name = _provider(model, options or ProviderOptions())
        return provider.defaults_sent(dataclasses.replace(request, model=name))
    except ProviderError:
        return {}


def guided_answers(model: str, options: ProviderOptions | None = None) -> bool:
    """Whether `model`'s provider wants an answer step in its guided form
    (`Provider.guided_answers`); False when the provider cannot be built."""
    try:
        provider, _ = _provider(model, options or ProviderOptions())
    except ProviderError:
        return False
    return bool(getattr(provider, "guided_answers", False))


async def _attempt(model: str, request: LLMRequest, options: ProviderOptions,
                   retry: RetryPolicy, on_delta: DeltaCallback | None,
                   streamed: list[bool]) -> LLMResponse:
    prefix, _ = split_model(model)
    provider, name = _provider(model, options)
    sent = dataclasses.replace(request, model=name)

    def forward(text: str) -> None:
        streamed[0] = True
        on_delta(text)  # type: ignore[misc]

    call = provider.complete(sent, forward if on_delta is not None else None)
    # A non-streaming attempt is bounded as a whole; a stream by the silence
    # between its chunks (the provider applies `stream_idle_timeout`), so a long
    # answer that keeps coming is never cut.
    limit = retry.timeout if retry.timeout is not None else (
        None if request.stream else request_timeout(request.extra, options.env))
    try:
        if limit is None:
            return await call
        return await asyncio.wait_for(call, limit)
    except asyncio.TimeoutError:
        raise timeout_error(prefix, f"no answer within {limit:g} s (provider option "
                            f"`request_timeout` or FLOWFORGE_MODEL_TIMEOUT)") from None
    except ProviderError:
        raise
    except (ValueError, AttributeError, TypeError, KeyError, IndexError) as exc:
        # The SDK choked on the body (JSON that is not JSON, an HTML page, a
        # shape with no choices): a bad answer, not a bad request.
        raise unusable_answer(prefix, f"{type(exc).__name__}: {str(exc)[:200]}") from None
    except OSError as exc:
        raise dropped_connection(prefix, f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - httpx's transport errors, by name
        names = {cls.__name__ for cls in type(exc).__mro__}
        if names & {"RemoteProtocolError", "ReadError", "ReadTimeout", "StreamError",
                    "TransportError", "HTTPError"}:
            raise dropped_connection(prefix, f"{type(exc).__name__}: {exc}") from None
        raise


async def call_model(model: str, request: LLMRequest, *,
                     options: ProviderOptions | None = None,
                     fallback: Sequence[str] = (),
                     retry: RetryPolicy | None = None,
                     on_delta: DeltaCallback | None = None,
                     on_retry: RetryCallback | None = None,
                     on_restart: RestartCallback | None = None) -> LLMResponse:
    """Send `request` to `model` (then to each `fallback` model) and return the
    first answer, with `cost` filled.  `request.model` is ignored: each model
    string decides the name sent.  Raises `ProviderError` (or its subclass
    `MissingCredentials`) when no model answered; the message lists every try."""
    options = options or ProviderOptions()
    retry = retry or DEFAULT_RETRY
    failures: list[str] = []
    attempts: list[dict[str, Any]] = []
    last: ProviderError | None = None
    void: list[tuple[str, int, ProviderError]] = []   # a cut stream not yet said void
    for candidate in [model, *fallback]:
        if void and on_restart is not None:
            on_restart(*void[-1])     # the fallback's answer replaces the cut one
        void.clear()
        number = 0
        while True:
            number += 1
            streamed = [False]
            started = time.time()
            try:
                response = await _attempt(candidate, request, options, retry, on_delta, streamed)
            except ProviderError as error:
                attempts.append({"model": candidate, "attempt": number, "error": str(error),
                                 "status": error.status, "start": started, "end": time.time()})
                last = error
                if not error.retryable:
                    # Not worth retrying or falling back: a bad request, a bad key, an
                    # unknown model.
                    if failures:
                        raise _summary(failures, candidate, error, number) from error
                    raise
                restart = streamed[0]
                delay = retry.delay_for(error, number)
                if delay is None:
                    failures.append(f"{candidate}: {error} ({number} attempt"
                                    f"{'s' if number > 1 else ''})")
                    if restart:
                        void.append((candidate, number, error))
                    break
                if restart and on_restart is not None:
                    on_restart(candidate, number, error)
                if on_retry is not None:
                    on_retry(candidate, number, error, delay)
                await retry.sleep(delay)
                continue
            cost = cost_of(candidate, response.usage)
            response.cost, response.input_cost, response.output_cost = (
                cost.total, cost.input, cost.output)
            response.model = candidate
            response.attempts = attempts
            return response
    assert last is not None
    raise _summary(failures, None, last, 0) from last


def _summary(failures: list[str], candidate: str | None, error: ProviderError,
             number: int) -> ProviderError:
    lines = list(failures)
    if candidate is not None:
        lines.append(f"{candidate}: {error} ({number} attempt{'s' if number > 1 else ''})")
    text = "every model failed:\n" + "\n".join(f"  - {line}" for line in lines)
    summary = ProviderError(text, retryable=error.retryable, retry_after=error.retry_after)
    summary.status = error.status   # set after: each line already names its HTTP status
    return summary
