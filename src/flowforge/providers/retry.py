"""When to try a model again, and how long to wait first.

Every provider turns its SDK's exceptions into `ProviderError` with a
`status`, a `retryable` flag and, when the server sent one, `retry_after`
(seconds).  This module holds the one rule for that classification
(`error_from_status`, `retry_after_seconds`) and the `RetryPolicy` that
`call.call_model` applies:

- retried: 408, 429, every 5xx (529 "overloaded" included), timeouts and
  connection errors;
- never retried: any other 4xx (a validation error, a bad key, an unknown
  model): sending the same request again cannot succeed;
- the wait grows exponentially (`base_delay * multiplier ** n`, capped at
  `max_delay`) with random jitter so that many runs do not retry in step;
  a server's `Retry-After` (or `retry-after-ms`) replaces the computed wait,
  and a `Retry-After` longer than `max_retry_after` counts as "not now":
  retries for that model stop and the fallback models are tried.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from flowforge.errors import ProviderError

__all__ = ["RetryPolicy", "RETRYABLE_STATUSES", "is_retryable_status", "retry_after_seconds",
           "error_from_status", "error_from_sdk", "timeout_error", "connection_error", "NO_RETRY",
           "unusable_answer", "dropped_connection", "cut_stream", "stream_error_event",
           "request_timeout", "stream_idle_timeout"]

#: Seconds one non-streaming attempt may take, and the longest silence between two
#: chunks of a streamed answer (a server that accepts and never answers is given up
#: on, then retried, instead of being waited on for the SDK's 600 s three times).
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_STREAM_IDLE_TIMEOUT = 60.0


def _seconds(value: Any, fallback: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return fallback
    return number if number > 0 else fallback


def _configured(extra: Mapping[str, Any] | None, env: Mapping[str, str] | None, option: str,
                variable: str, default: float) -> float:
    """The provider option, else the environment variable, else the default."""
    import os

    given = (extra or {}).get(option)
    if given is None:
        given = (env or {}).get(variable) or os.environ.get(variable)
    return _seconds(given, default)


def request_timeout(extra: Mapping[str, Any] | None = None,
                    env: Mapping[str, str] | None = None) -> float:
    """`request_timeout` in the block's provider options, else
    FLOWFORGE_MODEL_TIMEOUT, else 120 s."""
    return _configured(extra, env, "request_timeout", "FLOWFORGE_MODEL_TIMEOUT",
                       DEFAULT_REQUEST_TIMEOUT)


def stream_idle_timeout(extra: Mapping[str, Any] | None = None,
                        env: Mapping[str, str] | None = None) -> float:
    """`stream_idle_timeout` in the provider options, else
    FLOWFORGE_STREAM_IDLE_TIMEOUT, else 60 s."""
    return _configured(extra, env, "stream_idle_timeout", "FLOWFORGE_STREAM_IDLE_TIMEOUT",
                       DEFAULT_STREAM_IDLE_TIMEOUT)


def unusable_answer(provider: str, detail: str) -> ProviderError:
    """An answer that cannot be read as one (a body that is not JSON, an HTML
    page with 200, no choices, a stream that ends with nothing): like a 5xx,
    the next attempt may well be fine."""
    return ProviderError(f"the server's answer is unusable: {detail}", provider=provider,
                         retryable=True)


def dropped_connection(provider: str, detail: str = "") -> ProviderError:
    return ProviderError("the connection was closed in the middle of the answer"
                         + (f" ({detail})" if detail else ""), provider=provider,
                         retryable=True)


def cut_stream(provider: str, marker: str) -> ProviderError:
    """A stream that ended without its end marker (`marker`: `finish_reason`,
    `message_stop`, ...).  On a connection whose body ends when the server
    closes it (HTTP/1.1 with neither Content-Length nor chunked encoding) the
    HTTP client sees a whole body: only the missing marker says the answer was
    cut, so the partial text must not pass for the answer."""
    return ProviderError(f"the stream was cut: it ended without {marker} (the connection "
                         f"closed in the middle of the answer)", provider=provider,
                         retryable=True)


def stream_error_event(provider: str, message: str, status: int | None = None) -> ProviderError:
    """An error event in a stream that had begun (the HTTP status was 200): the
    answer is cut.  Retried like a dropped connection, unless the event names a
    status that cannot succeed when sent again (a 4xx other than 408 and 429)."""
    return ProviderError(f"the stream was cut by an error event: {message}", provider=provider,
                         status=status,
                         retryable=status is None or is_retryable_status(status))

#: Statuses that may succeed when sent again (plus every 5xx).
RETRYABLE_STATUSES = frozenset({408, 429})


def is_retryable_status(status: int | None) -> bool:
    return status is not None and (status in RETRYABLE_STATUSES or 500 <= status <= 599)


def retry_after_seconds(headers: Mapping[str, str] | Any | None,
                        now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` (seconds or an
    HTTP date); None when absent or unreadable."""
    if not headers:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(float(millis) / 1000, 0.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - (now if now is not None else time.time()), 0.0)


def error_from_status(provider: str, status: int, message: str,
                      headers: Mapping[str, str] | Any | None = None) -> ProviderError:
    """The `ProviderError` for an HTTP error answer, classified once for all providers."""
    return ProviderError(message, provider=provider, status=status,
                         retryable=is_retryable_status(status),
                         retry_after=retry_after_seconds(headers))


def timeout_error(provider: str, detail: str = "") -> ProviderError:
    return ProviderError(f"request timed out{': ' + detail if detail else ''}",
                         provider=provider, retryable=True)


def connection_error(provider: str, detail: str = "") -> ProviderError:
    return ProviderError(f"could not connect{': ' + detail if detail else ''}",
                         provider=provider, retryable=True)


def error_from_sdk(provider: str, exc: BaseException) -> ProviderError:
    """Classify an exception of a Stainless-generated SDK (`openai`, `anthropic`):
    `APIStatusError` carries `status_code` and `response`; `APITimeoutError`
    and `APIConnectionError` are told apart by name so no SDK is imported here."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "APITimeoutError" in names:
        return timeout_error(provider, str(exc))
    if "APIConnectionError" in names:
        # The SDK says "Connection error." both when nothing answered and when
        # the answer was cut while it was read: the cause tells them apart.
        cause = exc.__cause__ or exc.__context__
        cause_names = {cls.__name__ for cls in type(cause).__mro__} if cause else set()
        if cause_names & {"RemoteProtocolError", "ReadError"}:
            return dropped_connection(provider, f"{type(cause).__name__}: {cause}")
        return connection_error(provider, str(exc))
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        message = getattr(exc, "message", None) or str(exc)
        return error_from_status(provider, status, message,
                                 getattr(response, "headers", None))
    return ProviderError(str(exc) or type(exc).__name__, provider=provider)


Sleep = Callable[[float], Awaitable[Any]]


@dataclass(frozen=True)
class RetryPolicy:
    """How `call_model` retries one model before moving to the fallbacks.

    `attempts` counts every try, the first included (1 = no retry).
    `timeout` (seconds) bounds each attempt; None leaves it to the SDK.
    `sleep` is injectable so tests do not wait for real."""

    attempts: int = 3
    base_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 20.0
    jitter: float = 0.5              # the wait is drawn from [delay * (1 - jitter), delay]
    max_retry_after: float = 60.0
    timeout: float | None = None
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1 (1 means no retry)")
        if not 0 <= self.jitter <= 1:
            raise ValueError("RetryPolicy.jitter must be between 0 and 1")

    def backoff(self, retry_number: int) -> float:
        """The wait before retry `retry_number` (1 for the first retry), with jitter."""
        delay = min(self.max_delay, self.base_delay * self.multiplier ** (retry_number - 1))
        return delay * (1 - self.jitter * random.random())

    def delay_for(self, error: ProviderError, retry_number: int) -> float | None:
        """Seconds to wait before retrying after `error`, or None: do not retry."""
        if not error.retryable or retry_number >= self.attempts:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                return None
            return error.retry_after
        return self.backoff(retry_number)


#: One attempt, no waiting: for callers that handle failure themselves.
NO_RETRY = RetryPolicy(attempts=1)
