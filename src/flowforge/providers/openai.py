"""`openai/<model>` through the official `openai` SDK (Chat Completions API).

The key comes from `OPENAI_API_KEY` (process env over the workflow's `env:`);
`OPENAI_BASE_URL`, `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID` are honoured too.
`OpenAIChatProvider` is also the engine of `openai-compatible/...`, which
differs only in how the client is configured.

Against OpenAI itself (no `OPENAI_BASE_URL`), `max_tokens` is sent as
`max_completion_tokens` and the temperature is left out for the reasoning
models (`o1`, `o3`, `o4-mini`, `gpt-5`...), which refuse any other value.

The SDK's own retries are switched off (`max_retries=0`): `call_model` retries,
so that every attempt is visible and the policy is the same for every vendor.

A stream is whole only when it ends with a `finish_reason` or `[DONE]`: one
that just stops (a connection closed mid-answer) or carries an `error` event
is a cut stream (`retry.cut_stream`, `retry.stream_error_event`), retried.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from flowforge.errors import ProviderError
from flowforge.providers.base import (DeltaCallback, LLMRequest, LLMResponse, Message, Provider,
                                      Timing, ToolCall, Usage, as_arguments,
                                      check_model_requests_allowed, is_loopback_url, require)
from flowforge.providers.resolve import ProviderOptions, register_provider
from flowforge.providers.retry import (cut_stream, dropped_connection, error_from_sdk,
                                       stream_error_event, stream_idle_timeout, timeout_error,
                                       unusable_answer)

try:
    import openai as _sdk
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the openai provider needs the openai SDK: "
                      "pip install 'flowforge[openai]'") from _exc

__all__ = ["OpenAIChatProvider", "openai_messages", "openai_tools", "convert_openai_error"]

# OpenAI's reasoning models (o1, o3, o4-mini, gpt-5...) accept only the default temperature
_REASONING = re.compile(r"^(o\d|gpt-5)")


def openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages in the Chat Completions wire format."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.tool_call_id or "",
                        "content": message.content or ""})
        elif message.role == "assistant" and message.tool_calls:
            # "" rather than null: OpenAI takes either, llama.cpp servers and the chat
            # templates of small models need a string
            out.append({"role": "assistant", "content": message.content or "",
                        "tool_calls": [{"id": call.id, "type": "function",
                                        "function": {"name": call.name,
                                                     "arguments": json.dumps(call.arguments)}}
                                       for call in message.tool_calls]})
        else:
            out.append({"role": message.role, "content": message.content or ""})
    return out


#: The name of a `json_schema` response format when `extra.schema_name` gives none.
_SCHEMA_NAME = "response"


def openai_tools(request: LLMRequest) -> dict[str, Any]:
    """`tools` and `tool_choice` arguments, when tools are offered."""
    if not request.tools:
        return {}
    args: dict[str, Any] = {"tools": [{"type": "function",
                                       "function": {"name": t.name, "description": t.description,
                                                    "parameters": t.parameters}}
                                      for t in request.tools]}
    if request.tool_choice in ("auto", "required", "none"):
        args["tool_choice"] = request.tool_choice
    elif request.tool_choice:
        args["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    return args


def convert_openai_error(provider: str, exc: Exception) -> ProviderError:
    """One SDK exception -> a classified `ProviderError` (see `retry`)."""
    return error_from_sdk(provider, exc)


class OpenAIChatProvider(Provider):
    """Any server speaking the Chat Completions API, through the `openai` SDK.

    `response_format_style` is "json_schema" (OpenAI, vLLM, Ollama, llama.cpp's
    server) or "json_object" (llama-cpp-python's server, which takes
    `{"type": "json_object", "schema": ...}`)."""

    def __init__(self, name: str, client: Any, *, response_format_style: str = "json_schema",
                 remote: bool = True, stream_usage: bool = True,
                 official: bool = False) -> None:
        self.name = name
        self.client = client
        self.response_format_style = response_format_style
        self.remote = remote
        self.stream_usage = stream_usage
        self.official = official

    sent_options = ("seed", "top_p", "presence_penalty", "frequency_penalty", "user",
                    "reasoning_effort", "parallel_tool_calls")

    def _reasoning(self, request: LLMRequest) -> bool:
        return self.official and _REASONING.match(request.model) is not None

    def unsent(self, request: LLMRequest) -> dict[str, str]:
        out = super().unsent(request)
        if request.temperature is not None and self._reasoning(request):
            out["temperature"] = (f"OpenAI's reasoning model {request.model} takes only its "
                                  f"default temperature")
        return out

    def defaults_sent(self, request: LLMRequest) -> dict[str, Any]:
        if request.response_format is None or self.response_format_style == "json_object":
            return {}
        defaults = {"schema_name": _SCHEMA_NAME, "strict": False}    # the json_schema wrapper's
        return {f"extra.{key}": value for key, value in defaults.items()
                if key not in request.extra}

    def arguments(self, request: LLMRequest) -> dict[str, Any]:
        """Exactly what is sent, as keyword arguments of `chat.completions.create`."""
        args: dict[str, Any] = {"model": request.model,
                                "messages": openai_messages(request.messages),
                                **openai_tools(request)}
        if request.temperature is not None and not self._reasoning(request):
            args["temperature"] = request.temperature
        if request.max_tokens is not None:
            # OpenAI's own API wants max_completion_tokens (its reasoning models refuse
            # max_tokens); compatible servers know only max_tokens
            args["max_completion_tokens" if self.official else "max_tokens"] = request.max_tokens
        if request.stop:
            args["stop"] = request.stop
        if request.response_format is not None:
            if self.response_format_style == "json_object":
                args["response_format"] = {"type": "json_object",
                                           "schema": request.response_format}
            else:
                args["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": request.extra.get("schema_name", _SCHEMA_NAME),
                                    "schema": request.response_format,
                                    "strict": bool(request.extra.get("strict", False))}}
        for key in self.sent_options:
            if key in request.extra:
                args[key] = request.extra[key]
        if request.stream:
            args["stream"] = True
            if self.stream_usage:
                args["stream_options"] = {"include_usage": True}
        return args

    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        if self.remote:
            check_model_requests_allowed(self.name)
        start = time.time()
        args = self.arguments(request)
        try:
            if request.stream:
                return await self._stream(request, args, on_delta, start)
            completion = await self.client.chat.completions.create(**args)
        except _sdk.APIResponseValidationError as exc:
            raise unusable_answer(self.name, str(exc)[:200]) from exc
        except _sdk.OpenAIError as exc:
            raise convert_openai_error(self.name, exc) from exc
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list):
            raise unusable_answer(self.name, f"not a chat completion: {str(completion)[:200]!r}")
        if not choices or getattr(choices[0], "message", None) is None:
            raise unusable_answer(self.name, "the answer holds no choice")
        choice = choices[0]
        calls = [ToolCall(call.id or f"call_{i}", call.function.name,
                          as_arguments(call.function.arguments))
                 for i, call in enumerate(choice.message.tool_calls or [])]
        usage = completion.usage
        return LLMResponse(
            text=choice.message.content or "", tool_calls=calls,
            usage=Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage
            else Usage(),
            model=completion.model or request.model, finish_reason=choice.finish_reason,
            timing=Timing(start, time.time()), raw=completion)

    async def _stream(self, request: LLMRequest, args: dict[str, Any],
                      on_delta: DeltaCallback | None, start: float) -> LLMResponse:
        pieces: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage = Usage()
        finish: str | None = None
        model = request.model
        first: float | None = None
        idle = stream_idle_timeout(request.extra)
        try:
            stream = await asyncio.wait_for(self.client.chat.completions.create(**args), idle)
        except asyncio.TimeoutError:
            raise timeout_error(self.name, f"the server sent nothing for {idle:g} s (provider "
                                f"option `stream_idle_timeout` or "
                                f"FLOWFORGE_STREAM_IDLE_TIMEOUT)") from None
        received = 0
        done = _watch_done(stream)
        iterator = stream.__aiter__()
        while True:
            try:
                chunk = await asyncio.wait_for(iterator.__anext__(), idle)
            except StopAsyncIteration:
                break
            except asyncio.TimeoutError:
                raise timeout_error(self.name, f"no new part of the answer for {idle:g} s "
                                    f"(provider option `stream_idle_timeout` or "
                                    f"FLOWFORGE_STREAM_IDLE_TIMEOUT)") from None
            except _sdk.APIConnectionError as exc:
                raise dropped_connection(self.name, str(exc)) from exc
            except _sdk.APIError as exc:     # `data: {"error": ...}` in the stream
                raise stream_error_event(self.name, exc.message,
                                         _status_of(exc.body)) from exc
            if not hasattr(chunk, "choices"):
                raise unusable_answer(self.name, f"a streamed part is not a chunk: "
                                      f"{str(chunk)[:200]!r}")
            received += 1
            model = chunk.model or model
            if chunk.usage is not None:
                usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            for choice in chunk.choices or []:
                delta = choice.delta
                if delta is not None and delta.content:
                    first = first or time.time()
                    pieces.append(delta.content)
                    if on_delta is not None:
                        on_delta(delta.content)
                for call in (delta.tool_calls if delta is not None else None) or []:
                    slot = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                    slot["id"] = call.id or slot["id"]
                    if call.function is not None:
                        # OpenAI sends the name once; llama.cpp's server repeats the whole
                        # name in every chunk: a repeat is not more of the name
                        name = call.function.name or ""
                        if name != slot["name"]:
                            slot["name"] += name
                        slot["arguments"] += call.function.arguments or ""
                if choice.finish_reason:
                    finish = choice.finish_reason
        if not received:
            raise unusable_answer(self.name, "the stream ended without a single part (an "
                                  "empty body, or one that is not server-sent events)")
        if finish is None and not done.seen and (pieces or calls):
            raise cut_stream(self.name, "a finish_reason or [DONE]")
        if finish is None and not pieces and not calls:
            raise unusable_answer(self.name, "the stream ended with no choice and no text")
        tool_calls = [ToolCall(slot["id"] or f"call_{index}", slot["name"],
                               as_arguments(slot["arguments"]))
                      for index, slot in sorted(calls.items())]
        return LLMResponse(text="".join(pieces), tool_calls=tool_calls, usage=usage, model=model,
                           finish_reason=finish, timing=Timing(start, time.time(), first))

    async def aclose(self) -> None:
        await self.client.close()


class _DoneWatch:
    """Stands in for the SDK's SSE decoder and notes a `[DONE]`, which the SDK
    swallows: with `finish_reason`, the two markers of a stream that ended whole."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.seen = False

    async def aiter_bytes(self, iterator: Any) -> Any:
        async for event in self.decoder.aiter_bytes(iterator):
            if event.data.startswith("[DONE]"):
                self.seen = True
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.decoder, name)


def _watch_done(stream: Any) -> _DoneWatch:
    """Watch `stream` for `[DONE]` (before its first event is read).  An SDK
    whose stream has no `_decoder` leaves `seen` False: `finish_reason` alone
    then marks the end."""
    watch = _DoneWatch(getattr(stream, "_decoder", None))
    if watch.decoder is not None and hasattr(watch.decoder, "aiter_bytes"):
        stream._decoder = watch
    return watch


def _status_of(body: Any) -> int | None:
    """The HTTP status an error event names (`{"code": 503}`), if any."""
    code = body.get("code") if isinstance(body, dict) else None
    return int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) \
        else None


def _factory(name: str, options: ProviderOptions,
             http_client: Any = None) -> tuple[Provider, str]:
    env = options.env
    client = _sdk.AsyncOpenAI(api_key=require(env, "openai", "OPENAI_API_KEY"),
                              base_url=env.get("OPENAI_BASE_URL") or None,
                              organization=env.get("OPENAI_ORG_ID") or None,
                              project=env.get("OPENAI_PROJECT_ID") or None,
                              max_retries=0, http_client=http_client)
    base_url = env.get("OPENAI_BASE_URL")
    return OpenAIChatProvider("openai", client, remote=not is_loopback_url(base_url),
                              official=not base_url), name


register_provider("openai", _factory)
