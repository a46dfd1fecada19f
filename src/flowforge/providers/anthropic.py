"""`anthropic/<model>` through the official `anthropic` SDK (Messages API).

The key comes from `ANTHROPIC_API_KEY` (process env over the workflow's
`env:`); `ANTHROPIC_BASE_URL` is honoured.  Mapping to the Messages API:

- system messages -> the top-level `system` field;
- assistant tool calls -> `tool_use` blocks; tool results -> `tool_result`
  blocks, consecutive results merged into one user turn as the API requires;
- `tool_choice` "required" -> `{"type": "any"}`, a tool name -> `{"type": "tool"}`;
- a JSON-Schema `response_format` -> `output_config.format` (structured
  outputs); objects without `additionalProperties` get `false`, which the API
  demands;
- `max_tokens` is required by the API: 4096 when the block gives none.

`temperature` is not sent: the SDK's API version (2026-10-21) removed the
sampling parameters and answers 400 to any of them.  The SDK's own retries are
off; `call_model` retries.  A stream is whole only once `message_stop` came: one
that stops before it, or carries an `error` event, is a cut stream (retried
unless the error's type is a bad request).
"""

from __future__ import annotations

import copy
import time
from typing import Any

from flowforge.providers.base import (DeltaCallback, LLMRequest, LLMResponse, Message, Provider,
                                      Timing, ToolCall, Usage, as_arguments,
                                      check_model_requests_allowed, is_loopback_url, require)
from flowforge.providers.resolve import ProviderOptions, register_provider
from flowforge.providers.retry import cut_stream, error_from_sdk, stream_error_event

try:
    import anthropic as _sdk
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the anthropic provider needs the anthropic SDK: "
                      "pip install 'flowforge[anthropic]'") from _exc

__all__ = ["AnthropicProvider", "anthropic_messages", "strict_schema", "DEFAULT_MAX_TOKENS"]

DEFAULT_MAX_TOKENS = 4096


def anthropic_messages(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """(system text, Messages-API turns) for our messages."""
    system = "\n\n".join(m.content or "" for m in messages if m.role == "system") or None
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            block = {"type": "tool_result", "tool_use_id": message.tool_call_id or "",
                     "content": message.content or ""}
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list) \
                    and all(b.get("type") == "tool_result" for b in turns[-1]["content"]):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
        elif message.role == "assistant" and message.tool_calls:
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks += [{"type": "tool_use", "id": call.id, "name": call.name,
                        "input": call.arguments} for call in message.tool_calls]
            turns.append({"role": "assistant", "content": blocks})
        else:
            turns.append({"role": message.role, "content": message.content or ""})
    return system, turns


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` whose objects all say `additionalProperties: false`."""
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    out = copy.deepcopy(schema)
    walk(out)
    return out


class AnthropicProvider(Provider):
    name = "anthropic"

    sent_options = ()       # the Messages API has none of them (and no sampling at all)

    def __init__(self, client: Any, *, remote: bool = True) -> None:
        self.client = client
        self.remote = remote

    def unsent(self, request: LLMRequest) -> dict[str, str]:
        out = super().unsent(request)
        if request.temperature is not None:
            out["temperature"] = ("the Messages API version the anthropic SDK speaks "
                                  "(2026-10-21) refuses sampling parameters")
        return out

    def defaults_sent(self, request: LLMRequest) -> dict[str, Any]:
        return {"max_tokens": DEFAULT_MAX_TOKENS} if request.max_tokens is None else {}

    def arguments(self, request: LLMRequest) -> dict[str, Any]:
        """Exactly what is sent, as keyword arguments of `messages.create`."""
        system, turns = anthropic_messages(request.messages)
        args: dict[str, Any] = {"model": request.model, "messages": turns,
                                "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS}
        if system:
            args["system"] = system
        if request.tools:
            args["tools"] = [{"name": t.name, "description": t.description,
                              "input_schema": t.parameters} for t in request.tools]
            choice = request.tool_choice
            if choice in (None, "auto"):
                pass
            elif choice == "required":
                args["tool_choice"] = {"type": "any"}
            elif choice == "none":
                args["tool_choice"] = {"type": "none"}
            else:
                args["tool_choice"] = {"type": "tool", "name": choice}
        if request.response_format is not None:
            args["output_config"] = {"format": {"type": "json_schema",
                                                "schema": strict_schema(request.response_format)}}
        if request.stop:
            args["stop_sequences"] = request.stop
        if request.stream:
            args["stream"] = True
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
            message = await self.client.messages.create(**args)
        except _sdk.AnthropicError as exc:
            raise error_from_sdk(self.name, exc) from exc
        texts, calls = [], []
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, as_arguments(block.input)))
        return LLMResponse(text="".join(texts), tool_calls=calls, usage=_usage(message.usage),
                           model=message.model or request.model,
                           finish_reason=_finish(message.stop_reason),
                           timing=Timing(start, time.time()), raw=message)

    async def _stream(self, request: LLMRequest, args: dict[str, Any],
                      on_delta: DeltaCallback | None, start: float) -> LLMResponse:
        pieces: list[str] = []
        blocks: dict[int, dict[str, Any]] = {}
        prompt = completion = 0
        stop: str | None = None
        model = request.model
        first: float | None = None
        ended = False
        stream = await self.client.messages.create(**args)
        async for event in _events(stream, self.name):
            kind = event.type
            if kind == "message_start":
                model = event.message.model or model
                prompt = _usage(event.message.usage).prompt_tokens
                completion = event.message.usage.output_tokens or 0
            elif kind == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
            elif kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta" and delta.text:
                    first = first or time.time()
                    pieces.append(delta.text)
                    if on_delta is not None:
                        on_delta(delta.text)
                elif delta.type == "input_json_delta" and event.index in blocks:
                    blocks[event.index]["json"] += delta.partial_json or ""
            elif kind == "message_delta":
                stop = event.delta.stop_reason or stop
                if event.usage is not None and event.usage.output_tokens is not None:
                    completion = event.usage.output_tokens
            elif kind == "message_stop":
                ended = True
        if not ended:
            raise cut_stream(self.name, "message_stop")
        calls = [ToolCall(slot["id"], slot["name"], as_arguments(slot["json"] or "{}"))
                 for _, slot in sorted(blocks.items())]
        return LLMResponse(text="".join(pieces), tool_calls=calls,
                           usage=Usage(prompt, completion), model=model,
                           finish_reason=_finish(stop), timing=Timing(start, time.time(), first))

    async def aclose(self) -> None:
        await self.client.close()


#: The Messages API's error types (its errors page) -> the HTTP status each stands for: an
#: `error` event in a stream carries the type, the stream's status is 200.
_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401,
                 "billing_error": 402, "permission_error": 403, "not_found_error": 404,
                 "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                 "timeout_error": 504, "overloaded_error": 529}


async def _events(stream: Any, provider: str) -> Any:
    """The stream's events; an `error` event (the SDK raises it as a status error
    carrying the stream's 200) becomes a cut stream, classified by its type."""
    iterator = stream.__aiter__()
    while True:
        try:
            event = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except _sdk.APIStatusError as exc:
            if exc.status_code != 200:
                raise
            error = exc.body.get("error") if isinstance(exc.body, dict) else None
            error = error if isinstance(error, dict) else {}
            raise stream_error_event(provider, str(error.get("message") or exc.message),
                                     _ERROR_STATUS.get(str(error.get("type")))) from exc
        yield event


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    prompt = (usage.input_tokens or 0) + (getattr(usage, "cache_read_input_tokens", 0) or 0) + \
        (getattr(usage, "cache_creation_input_tokens", 0) or 0)
    return Usage(prompt, usage.output_tokens or 0)


_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
           "tool_use": "tool_calls"}


def _finish(reason: str | None) -> str | None:
    return _FINISH.get(reason or "", reason)


def _factory(name: str, options: ProviderOptions,
             http_client: Any = None) -> tuple[Provider, str]:
    env = options.env
    base_url = env.get("ANTHROPIC_BASE_URL") or None
    client = _sdk.AsyncAnthropic(api_key=require(env, "anthropic", "ANTHROPIC_API_KEY"),
                                 base_url=base_url, max_retries=0, http_client=http_client)
    return AnthropicProvider(client, remote=not is_loopback_url(base_url)), name


register_provider("anthropic", _factory)
