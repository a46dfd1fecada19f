"""What every LLM block shares: which model, one call path, and the record.

Model choice, in order: the command line's `--model` (`context.model_override`)
replaces every block's model; else the block's `model`; else the workflow's
`defaults.model`; else the default model (`providers.resolve.default_model`:
`local/qwen2.5-0.5b` when installed, else `local/smollm2`).  Other settings (temperature,
max_tokens, stream, fallback) come from the block, else `defaults:`.

Every request is published as an `llm_request` event and every response (or
failure) as `llm_response`, exactly as sent and received (STYLE habit 5: the
user sees what the model saw); streamed text flows as `llm_delta` events.
A setting the block's provider cannot send (`Provider.unsent`: Claude takes
no temperature) is left out of the recorded request and named once per run
and block in a `warning` event; so is one a fallback model that answered
could not take.
A block's later requests carry only the messages added since its previous
one (`messages_offset`); `sent_requests(events, block_id)` rebuilds them whole.
Before each call the run's budget (`context.budget`, see `engine.budget`) is
checked: the call fails, or goes to the budget's downgrade model.
`ModelCalls` sums one block's usage, cost and model time across the calls it
makes (tool-loop iterations, repairs, retries).

A block's own `api_key` (written as a template, `{{env.TEAM_KEY}}` or
`{{secrets.NAME}}`: the validator refuses a key written in the document)
replaces its provider's key for that block's calls only.  The key goes to
the provider and nowhere else: it is not in the request record, and an
error that quotes it shows `***`.

All calls go through `_complete`, the one place that reaches a provider: it
is `providers.call.call_model`: retries with backoff, then the `fallback`
models in order, and the cost from the price table.  Retries are published
as `llm_retry` events.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Mapping

from pydantic import Field

from flowforge.model_strings import parse_model, qualified
from flowforge.providers.base import LLMRequest, LLMResponse, Message, ToolSpec
from flowforge.providers.call import call_model, defaults_sent, guided_answers, unsent_settings
from flowforge.blocks.base import BlockConfig, Output, policy_of
from flowforge.errors import ProviderError
from flowforge.providers.resolve import ProviderOptions, default_model, key_variables
from flowforge.workflow.policy import ENDPOINT_OPTIONS

__all__ = ["USAGE_OUTPUTS", "choose_model", "setting", "provider_options", "ModelCalls", "block_data",
           "name_mapping", "sent_requests", "API_KEY_DOC", "LLMBlockConfig",
           "BLOCK_ENDPOINT_FIELDS"]

#: The docstring of every LLM block's `api_key` field.
API_KEY_DOC = ("This block's provider key, as a template (`{{env.TEAM_KEY}}`, "
               "`{{secrets.NAME}}`): replaces the provider's usual key for this block only; "
               "never recorded.")


#: `model`, `tokens` and `cost`, as every LLM block's output has them (`ModelCalls.usage`).
USAGE_OUTPUTS = {
    "model": Output("string", "The model that answered (a fallback's name when one did)."),
    "tokens": Output("{prompt, completion, total}", "Tokens of every call the block made, "
                     "as the provider reported them."),
    "cost": Output("{input, output, total}", "What those calls cost in USD (the "
                   "`genai-prices` table; 0 for local and scripted models)."),
}


#: run id -> the (block, model, setting) already warned about: one warning per run and
#: block, however many calls, loop passes or parallel items.  The oldest runs are
#: forgotten past `_WARNED_RUNS` (a long-lived server runs many).
_WARNED: OrderedDict[str, set[tuple[str, str, str]]] = OrderedDict()
_WARNED_RUNS = 1000


def choose_model(context: Any, configured: str | None) -> str:
    """The model a call goes to; a bare name of a well-known family (`--model
    gpt-4o`, or a template that resolved to one) is read with its provider,
    as a document's is when it is compiled."""
    chosen = getattr(context, "model_override", None) or configured or \
        context.defaults.get("model") or default_model()
    return qualified(chosen) or chosen


def setting(context: Any, value: Any, key: str, fallback: Any = None) -> Any:
    """The block's value, else the workflow's `defaults.<key>`, else `fallback`."""
    if value is not None:
        return value
    default = context.defaults.get(key)
    return fallback if default is None else default


def provider_options(context: Any, endpoint_chosen: bool = False) -> ProviderOptions:
    """Keys and settings for the providers: the run's `provider_env` (its
    environment, shared provider keys, the user's secrets) where the engine
    gives one, else the plain environment (a context built by hand)."""
    provider_env = getattr(context, "provider_env", None)
    env = provider_env(endpoint_chosen) if provider_env is not None else dict(context.env)
    return ProviderOptions(env=env, base_dir=getattr(context, "source_dir", Path()))


def _endpoint_chosen(context: Any, extra: Mapping[str, Any]) -> bool:
    """True when the document picks the provider's URL or key source; that
    needs the `provider_endpoints` capability (checked here, at run time, too)."""
    chosen = [key for key in ENDPOINT_OPTIONS if key in extra]
    for key in chosen:
        policy_of(context).require("provider_endpoints", f"defaults.provider_options.{key}",
                                   f"setting the model provider's `{key}`")
    return bool(chosen)


def _with_key(options: ProviderOptions, api_key: str, models: tuple[str, ...],
              extra: Mapping[str, Any]) -> ProviderOptions:
    """`options` whose environment holds `api_key` wherever the providers of
    `models` read their key (a new provider instance: clients are cached
    per key)."""
    env = dict(options.env)
    names = [name for model in models for name in key_variables(model)]
    if extra.get("api_key_env"):
        names.append(str(extra["api_key_env"]))
    for name in names:
        env[name] = api_key
    return ProviderOptions(env=env, base_dir=options.base_dir)


def block_data(context: Any) -> dict[str, Any]:
    """Outputs of the blocks visible to this block, by id (the seed's blockData)."""
    return context.block_data()


def name_mapping(context: Any) -> dict[str, str]:
    """Normalised block name -> id (the seed's blockNameMapping)."""
    return context.name_mapping()


async def _complete(model: str, request: LLMRequest, *, options: ProviderOptions,
                    fallback: tuple[str, ...], on_delta: Any, on_retry: Any,
                    on_restart: Any = None) -> LLMResponse:
    """The single provider call site."""
    return await call_model(model, request, options=options, fallback=fallback,
                            on_delta=on_delta, on_retry=on_retry, on_restart=on_restart)


def sent_requests(events: list[dict[str, Any]], block_id: str) -> list[dict[str, Any]]:
    """Every request a block sent, each with its full `messages`, rebuilt from
    the run's `llm_request` events (which carry only the new messages)."""
    out: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for event in events:
        if event.get("type") != "llm_request" or event.get("block_id") != block_id:
            continue
        recorded = dict(event["request"])
        offset = recorded.pop("messages_offset", 0)
        messages = messages[:offset] + list(recorded["messages"])
        recorded["messages"] = messages
        out.append(recorded)
    return out


class LLMBlockConfig(BlockConfig):
    """What every LLM block's config has beside its own fields, written once:
    the model and its fallbacks, the key, the sampling settings, and the Azure
    OpenAI endpoint and API version of this block (the Sim-style executor's
    `azureEndpoint`/`azureApiVersion`), which otherwise come from
    `defaults.provider_options` or the environment.  A block whose default
    differs (a router's temperature 0) redeclares that field alone."""

    model: str | None = None
    """Model string, e.g. `openai/gpt-4o` (default: `defaults.model`, else the embedded
    default: `local/qwen2.5-0.5b` where installed, else `local/smollm2`)."""
    api_key: str | None = Field(None, description=API_KEY_DOC)
    fallback: list[str] | None = None
    """Models tried in order when the model keeps failing, after retries (default:
    `defaults.fallback`)."""
    temperature: float | None = Field(None, ge=0, le=2)
    """Sampling temperature, 0-2 (default: `defaults.temperature`, else the provider's)."""
    max_tokens: int | None = Field(None, ge=1)
    """Most tokens one answer may take (default: `defaults.max_tokens`, else the
    provider's); a run's budget may cap it lower."""
    azure_endpoint: str | None = Field(None, max_length=500)
    """Azure OpenAI endpoint for an `openai-compatible/azure/<deployment>` model (needs
    the `provider_endpoints` capability on a server)."""
    azure_api_version: str | None = Field(None, max_length=50)
    """Azure OpenAI API version, e.g. 2024-10-21 (with `azure_endpoint`)."""


#: an LLM block's endpoint field -> the provider option it sets
BLOCK_ENDPOINT_FIELDS = {"azure_endpoint": "base_url", "azure_api_version": "api_version"}


class ModelCalls:
    """One block's conversation with its model: calls, record, totals."""

    def __init__(self, context: Any, model: str, *, fallback: tuple[str, ...] = (),
                 stream: bool = False, api_key: str | None = None,
                 config: Any = None) -> None:
        self.context = context
        self.model = model
        self.fallback = tuple(fallback)
        self.stream = stream
        # Workflow-wide provider settings (base_url, api_key_env, parallel_tool_calls, ...)
        # from `defaults: {provider_options: {...}}`, passed as LLMRequest.extra; a
        # block's own endpoint fields replace them for this block.
        self.provider_extra = dict(context.defaults.get("provider_options") or {})
        for field, option in BLOCK_ENDPOINT_FIELDS.items():
            value = getattr(config, field, None)
            if value:
                self.provider_extra[option] = value
        self.options = provider_options(context, _endpoint_chosen(context, self.provider_extra))
        if getattr(context, "model_override", None) == model:
            # `--model` (or `serve --model`) names no document's file: relative to
            # the working directory, as any path on a command line is
            self.options = ProviderOptions(env=self.options.env, base_dir=Path.cwd())
        self.api_key = api_key or None
        if self.api_key:
            self.options = _with_key(self.options, self.api_key, (model, *self.fallback),
                                     self.provider_extra)
        if not getattr(context, "model_override", None):     # the server's own choice
            for name in (model, *self.fallback):
                policy_of(context).check_model(name, "with.model", own_key=self._keyed(name))
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_input = 0.0
        self.cost_output = 0.0
        self.cost_total = 0.0
        self.model_time = 0.0
        self.count = 0
        self.used_model = model
        self._sent: list[Message] = []

    def guided(self) -> bool:
        """Whether this block's model wants answer steps in their guided form
        (`Provider.guided_answers`: the embedded small models)."""
        return guided_answers(self.model, self.options)

    def _keyed(self, model: str) -> bool:
        """Whether this block's calls to `model` carry a key the run was given (the
        block's `api_key`, the user's secret, the document's `env:`, or a key the
        server shares): the gate then has no server key to protect."""
        if self.api_key:
            return True
        try:
            names = key_variables(model)
        except ProviderError:
            return False
        return any(self.options.env.get(name) for name in names)

    async def __call__(self, messages: list[Message], *, tools: list[ToolSpec] | None = None,
                       response_format: dict[str, Any] | None = None,
                       temperature: float | None = None, max_tokens: int | None = None,
                       tool_choice: str | None = None, purpose: str = "answer",
                       extra: Mapping[str, Any] | None = None) -> LLMResponse:
        self.count += 1
        meter = getattr(self.context, "budget", None)
        if meter is None:
            return await self._call(messages, tools, response_format, temperature, max_tokens,
                                    tool_choice, purpose, extra)
        allowed = meter.check(self.model, messages, tools, max_tokens, self.context.emit)
        try:
            if allowed.model != self.model:  # downgraded: the cheaper model, no fallbacks
                policy_of(self.context).check_model(allowed.model, "budget.on_exceed.downgrade",
                                                    own_key=self._keyed(allowed.model))
                self.model, self.fallback, self.used_model = allowed.model, (), allowed.model
            return await self._call(messages, tools, response_format, temperature,
                                    allowed.max_tokens, tool_choice, purpose, extra)
        finally:
            meter.release(allowed.held)

    async def _call(self, messages: list[Message], tools: list[ToolSpec] | None,
                    response_format: dict[str, Any] | None, temperature: float | None,
                    max_tokens: int | None, tool_choice: str | None, purpose: str,
                    extra: Mapping[str, Any] | None) -> LLMResponse:
        request = LLMRequest(model=parse_model(self.model).name or self.model,
                             messages=list(messages), tools=list(tools or []),
                             response_format=response_format, temperature=temperature,
                             max_tokens=max_tokens, stream=self.stream, tool_choice=tool_choice,
                             extra={**self.provider_extra, **(extra or {})})
        emit = self.context.emit
        unsent = unsent_settings(self.model, request, self.options)
        emit("llm_request", model=self.model, call=self.count, purpose=purpose,
             request=self._record(request, unsent,
                                  defaults_sent(self.model, request, self.options)))
        self._warn(self.model, unsent)
        on_delta = on_restart = None
        if self.stream:
            def on_delta(text: str, _call: int = self.count) -> None:
                emit("llm_delta", text=text, call=_call)

            def on_restart(model: str, attempt: int, error: Exception,
                           _call: int = self.count) -> None:
                # The text streamed so far is void: the answer starts again.
                emit("llm_restart", call=_call, model=model, attempt=attempt,
                     error=self._mask(str(error)))
        started = time.perf_counter()
        try:
            response = await _complete(self.model, request, options=self.options,
                                       fallback=self.fallback, on_delta=on_delta,
                                       on_retry=self._on_retry, on_restart=on_restart)
        except Exception as exc:
            self.model_time += time.perf_counter() - started
            if self.api_key and self.api_key in str(exc):
                exc = ProviderError(self._mask(str(exc)),
                                    retryable=getattr(exc, "retryable", False))
                emit("llm_response", model=self.model, call=self.count, error=str(exc))
                raise exc from None
            emit("llm_response", model=self.model, call=self.count, error=str(exc))
            raise
        self.model_time += time.perf_counter() - started
        if response.model and response.model != self.model:    # a fallback answered
            self._warn(response.model, unsent_settings(response.model, request, self.options))
        self._count(response)
        emit("llm_response", model=self.model, call=self.count, response=response.to_dict())
        return response

    def _record(self, request: LLMRequest, unsent: Mapping[str, str],
                defaults: Mapping[str, Any]) -> dict[str, Any]:
        """The request as sent, with only the messages that are new since this
        block's previous request (`messages_offset` says where they start): a
        tool loop appends to one transcript, and copying it whole at every turn
        would make the record grow with the square of the turns.  A setting in
        `unsent` is recorded as not set (`None`, or absent from `extra`); one the
        provider fills in when the block leaves it unset (`defaults`: Claude's
        `max_tokens`) is recorded with the value sent."""
        sent = request.messages
        previous = self._sent
        offset = 0
        limit = min(len(previous), len(sent))
        while offset < limit and sent[offset] is previous[offset]:
            offset += 1
        self._sent = list(sent)
        record = {"model": request.model, "messages_offset": offset,
                  "messages": [message.to_dict() for message in sent[offset:]],
                  "tools": [{"name": t.name, "description": t.description,
                             "parameters": t.parameters} for t in request.tools],
                  "response_format": request.response_format,
                  "temperature": request.temperature, "max_tokens": request.max_tokens,
                  "stream": request.stream, "tool_choice": request.tool_choice,
                  "stop": request.stop, "extra": dict(request.extra)}
        for setting in unsent:
            if setting.startswith("extra."):
                record["extra"].pop(setting.removeprefix("extra."), None)
            elif setting in record:
                record[setting] = None
        for setting, value in defaults.items():
            if setting.startswith("extra."):
                record["extra"][setting.removeprefix("extra.")] = value
            elif setting in record:
                record[setting] = value
        return record

    def _warn(self, model: str, unsent: Mapping[str, str]) -> None:
        """One `warning` event naming what `model` was not sent (each setting
        once per run and block)."""
        if not unsent:
            return
        run = str(getattr(self.context, "run_id", None) or id(self))
        block = str(getattr(self.context, "block_id", ""))
        seen = _WARNED.setdefault(run, set())
        _WARNED.move_to_end(run)
        while len(_WARNED) > _WARNED_RUNS:
            _WARNED.popitem(last=False)
        new = {setting: why for setting, why in unsent.items()
               if (block, model, setting) not in seen}
        if not new:
            return
        seen.update((block, model, setting) for setting in new)
        reasons = "; ".join(f"{setting} ({why})" for setting, why in new.items())
        self.context.emit("warning", model=model, settings=list(new),
                          message=f"{model} cannot take {reasons}: not sent, and left out "
                                  f"of the recorded request")

    def _mask(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text

    def _on_retry(self, model: str, attempt: int, error: Exception, delay: float) -> None:
        self.context.emit("llm_retry", model=model, attempt=attempt,
                          error=self._mask(str(error)), delay=round(delay, 3))

    def _count(self, response: LLMResponse) -> None:
        self.prompt_tokens += response.usage.prompt_tokens
        self.completion_tokens += response.usage.completion_tokens
        self.cost_input += float(response.input_cost or 0.0)
        self.cost_output += float(response.output_cost or 0.0)
        self.cost_total += float(response.cost or 0.0)
        meter = getattr(self.context, "budget", None)
        if meter is not None:
            meter.add(response.usage.prompt_tokens + response.usage.completion_tokens,
                      float(response.cost or 0.0))
        if response.model and "/" in response.model:   # the model that answered (a fallback?)
            self.used_model = response.model

    def usage(self) -> dict[str, Any]:
        """`model`, `tokens` and `cost` as every LLM block reports them."""
        return {"model": self.used_model,
                "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens,
                           "total": self.prompt_tokens + self.completion_tokens},
                "cost": {"input": round(self.cost_input, 10),
                         "output": round(self.cost_output, 10),
                         "total": round(self.cost_total, 10)}}
