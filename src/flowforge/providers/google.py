"""`google/<model>` (Gemini) through the official `google-genai` SDK.

The key comes from `GEMINI_API_KEY` or `GOOGLE_API_KEY` (process env over the
workflow's `env:`); `GOOGLE_GEMINI_BASE_URL` points the client elsewhere (a
proxy, or a test server).  Mapping to `generate_content`:

- system messages -> `system_instruction`; assistant turns have role `model`;
- tools -> one `Tool` of `FunctionDeclaration`s with `parameters_json_schema`;
  a call -> a `function_call` part; its result -> a `function_response` part
  `{"result": <text>}` (consecutive results in one user turn);
- Gemini's `thought_signature` on a call is kept in `ToolCall.meta` and sent
  back with it (Gemini 3 rejects an unsigned call; a call it never signed gets
  the documented `skip_thought_signature_validator` sentinel);
- `tool_choice` "required" -> mode ANY, a tool name -> ANY restricted to it,
  "none" -> NONE;
- a JSON-Schema `response_format` -> `response_mime_type: application/json`
  with `response_json_schema`.

The SDK retries nothing unless told to (`retry_options` unset); `call_model`
retries.  A stream is whole only once a candidate's `finishReason` (or the
prompt's `blockReason`) came: one that stops before is a cut stream, retried.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from flowforge.errors import ProviderError
from flowforge.providers.base import (DeltaCallback, LLMRequest, LLMResponse, Message, Provider,
                                      Timing, ToolCall, Usage, as_arguments,
                                      check_model_requests_allowed, is_loopback_url, require)
from flowforge.providers.resolve import ProviderOptions, register_provider
from flowforge.providers.retry import (connection_error, cut_stream, dropped_connection,
                                       error_from_status, timeout_error, unusable_answer)

try:
    from google import genai as _genai
    from google.genai import errors as _errors
    from google.genai import types as _types
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the google provider needs the google-genai SDK: "
                      "pip install 'flowforge[google]'") from _exc

__all__ = ["GoogleProvider", "google_contents", "google_config"]


def _signature(call: ToolCall, model: str) -> bytes | None:
    """The call's thought signature as Gemini sent it; for a call it never signed (another
    model's, or a replayed history), Gemini 3 and later demand one, and the documented
    sentinel `skip_thought_signature_validator` stands in."""
    signature = call.meta.get("thought_signature")
    if signature:
        return base64.b64decode(signature)
    if model.startswith(("gemini-1", "gemini-2")):
        return None
    return _SKIP_SIGNATURE


_SKIP_SIGNATURE = base64.urlsafe_b64decode("skip_thought_signature_validator")


def google_contents(messages: list[Message],
                    model: str = "") -> tuple[str | None, list[_types.Content]]:
    """(system instruction, contents) for our messages."""
    system = "\n\n".join(m.content or "" for m in messages if m.role == "system") or None
    names = {call.id: call.name for m in messages for call in (m.tool_calls or [])}
    contents: list[_types.Content] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            name = message.name or names.get(message.tool_call_id or "", "tool")
            part = _types.Part(function_response=_types.FunctionResponse(
                id=message.tool_call_id, name=name, response={"result": message.content or ""}))
            last = contents[-1] if contents else None
            if last is not None and last.role == "user" and last.parts and \
                    all(p.function_response is not None for p in last.parts):
                last.parts.append(part)
            else:
                contents.append(_types.Content(role="user", parts=[part]))
        elif message.role == "assistant":
            parts = [_types.Part(text=message.content)] if message.content else []
            parts += [_types.Part(function_call=_types.FunctionCall(
                id=call.id, name=call.name, args=call.arguments),
                thought_signature=_signature(call, model))
                for call in message.tool_calls or []]
            contents.append(_types.Content(role="model", parts=parts or [_types.Part(text="")]))
        else:
            contents.append(_types.Content(role="user",
                                           parts=[_types.Part(text=message.content or "")]))
    return system, contents


def google_config(request: LLMRequest, system: str | None) -> _types.GenerateContentConfig:
    config: dict[str, Any] = {}
    if system:
        config["system_instruction"] = system
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.max_tokens is not None:
        config["max_output_tokens"] = request.max_tokens
    if request.stop:
        config["stop_sequences"] = request.stop
    for key in GoogleProvider.sent_options:
        if key in request.extra:
            config[key] = request.extra[key]
    if request.response_format is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = request.response_format
    if request.tools:
        config["tools"] = [_types.Tool(function_declarations=[
            _types.FunctionDeclaration(name=t.name, description=t.description,
                                       parameters_json_schema=t.parameters)
            for t in request.tools])]
        choice = request.tool_choice
        mode, allowed = None, None
        if choice == "required":
            mode = "ANY"
        elif choice == "none":
            mode = "NONE"
        elif choice not in (None, "auto"):
            mode, allowed = "ANY", [choice]
        if mode is not None:
            config["tool_config"] = _types.ToolConfig(
                function_calling_config=_types.FunctionCallingConfig(
                    mode=mode, allowed_function_names=allowed))
        # the SDK would otherwise run Python callables itself; ours are declarations only
        config["automatic_function_calling"] = _types.AutomaticFunctionCallingConfig(
            disable=True)
    return _types.GenerateContentConfig(**config)


def _convert_error(exc: BaseException) -> ProviderError:
    if isinstance(exc, _errors.APIError):
        response = getattr(exc, "response", None)
        return error_from_status("google", exc.code, exc.message or str(exc),
                                 getattr(response, "headers", None))
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "TimeoutException" in names:
        return timeout_error("google", str(exc))
    if names & {"RemoteProtocolError", "ReadError"}:      # the answer was cut while read
        return dropped_connection("google", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, ValueError):     # a body (or a streamed part) that is not whole JSON
        return unusable_answer("google", f"{type(exc).__name__}: {str(exc)[:200]}")
    if "TransportError" in names or "ConnectError" in names:
        return connection_error("google", str(exc))
    return ProviderError(str(exc) or type(exc).__name__, provider="google")


def _usage(metadata: Any) -> Usage:
    if metadata is None:
        return Usage()
    completion = (metadata.candidates_token_count or 0) + \
        (getattr(metadata, "thoughts_token_count", 0) or 0)
    return Usage(metadata.prompt_token_count or 0, completion)


_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


def _blocked(response: Any) -> str | None:
    """Why Gemini refused the prompt itself (`promptFeedback.blockReason`): then
    no candidate comes, and that refusal is the whole answer."""
    feedback = getattr(response, "prompt_feedback", None)
    reason = getattr(feedback, "block_reason", None) if feedback is not None else None
    return getattr(reason, "value", reason) or None


def _parts(response: Any, offset: int = 0) -> tuple[str, list[ToolCall], str | None]:
    texts: list[str] = []
    calls: list[ToolCall] = []
    finish = None
    for candidate in (response.candidates or [])[:1]:
        reason = candidate.finish_reason
        finish = _FINISH.get(getattr(reason, "value", reason) or "",
                             getattr(reason, "value", reason))
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.function_call is not None:
                call = part.function_call
                meta = ({"thought_signature": base64.b64encode(part.thought_signature).decode()}
                        if part.thought_signature else {})
                calls.append(ToolCall(call.id or f"call_{offset + len(calls)}", call.name or "",
                                      as_arguments(call.args or {}), meta))
            elif part.text and not part.thought:
                texts.append(part.text)
    return "".join(texts), calls, finish


class GoogleProvider(Provider):
    name = "google"
    sent_options = ("seed", "top_p", "top_k")

    def __init__(self, client: Any, *, remote: bool = True) -> None:
        self.client = client
        self.remote = remote

    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        if self.remote:
            check_model_requests_allowed(self.name)
        start = time.time()
        system, contents = google_contents(request.messages, request.model)
        config = google_config(request, system)
        try:
            if request.stream:
                return await self._stream(request, contents, config, on_delta, start)
            response = await self.client.aio.models.generate_content(
                model=request.model, contents=contents, config=config)
        except ProviderError:
            raise
        except Exception as exc:  # the SDK lets httpx errors through as they are
            raise _convert_error(exc) from exc
        text, calls, finish = _parts(response)
        return LLMResponse(text=text, tool_calls=calls, usage=_usage(response.usage_metadata),
                           model=response.model_version or request.model,
                           finish_reason="tool_calls" if calls else finish,
                           timing=Timing(start, time.time()), raw=response)

    async def _stream(self, request: LLMRequest, contents: list[Any], config: Any,
                      on_delta: DeltaCallback | None, start: float) -> LLMResponse:
        pieces: list[str] = []
        calls: list[ToolCall] = []
        usage = Usage()
        finish = None
        model = request.model
        first: float | None = None
        stream = await self.client.aio.models.generate_content_stream(
            model=request.model, contents=contents, config=config)
        async for chunk in stream:
            text, chunk_calls, chunk_finish = _parts(chunk, len(calls))
            model = chunk.model_version or model
            finish = chunk_finish or _blocked(chunk) or finish
            if chunk.usage_metadata is not None:
                usage = _usage(chunk.usage_metadata)
            calls.extend(chunk_calls)
            if text:
                first = first or time.time()
                pieces.append(text)
                if on_delta is not None:
                    on_delta(text)
        if finish is None:
            raise cut_stream(self.name, "a finishReason")
        return LLMResponse(text="".join(pieces), tool_calls=calls, usage=usage, model=model,
                           finish_reason="tool_calls" if calls else finish,
                           timing=Timing(start, time.time(), first))


def _factory(name: str, options: ProviderOptions,
             http_client: Any = None) -> tuple[Provider, str]:
    env = options.env
    key = require(env, "google", "GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url = env.get("GOOGLE_GEMINI_BASE_URL") or None
    http: dict[str, Any] = {}
    if base_url:
        http["base_url"] = base_url
    if http_client is not None:
        http["httpx_async_client"] = http_client
    client = _genai.Client(api_key=key, http_options=_types.HttpOptions(**http) if http else None)
    return GoogleProvider(client, remote=not is_loopback_url(base_url)), name


register_provider("google", _factory)
