"""One request and one response shape for every LLM back end.

A provider implements a single async method, `complete(request, on_delta)`.
Blocks build an `LLMRequest` (messages, tools, JSON-Schema response format,
temperature, max tokens, stream) and get back an `LLMResponse` (text, tool
calls, usage, timing), whatever the vendor.  Optional features a back end
lacks raise `ProviderError("... not supported by X")`, never a silent no-op.

`ALLOW_MODEL_REQUESTS` is the global switch tests turn off: providers that
would leave the machine check it (pydantic-ai's habit), so a test can never
call a hosted API by accident.
"""

from __future__ import annotations

import abc
import ipaddress
import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, Mapping
from urllib.parse import urlsplit

from flowforge.errors import MissingCredentials, ProviderError

__all__ = [
    "ALLOW_MODEL_REQUESTS",
    "Message",
    "ToolSpec",
    "as_arguments",
    "ToolCall",
    "LLMRequest",
    "Usage",
    "Timing",
    "LLMResponse",
    "Provider",
    "DeltaCallback",
    "check_model_requests_allowed",
    "grammar_schema",
    "is_loopback_url",
    "require",
    "SAMPLING_OPTIONS",
]

#: Set to False (tests do) to make every non-local provider refuse to send requests.
ALLOW_MODEL_REQUESTS = True

#: The `LLMRequest.extra` keys that go into the request to the model; the other keys
#: of `extra` (base_url, api_key_env, timeouts, ...) configure the client and are not
#: model settings.  A provider that sends only some of them says which (`sent_options`).
SAMPLING_OPTIONS = ("seed", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                    "repeat_penalty", "reasoning_effort", "parallel_tool_calls", "user")

Role = Literal["system", "user", "assistant", "tool"]
DeltaCallback = Callable[[str], None]


@dataclass
class ToolCall:
    """A call the model asked for. `arguments` is parsed JSON (a dict).
    `meta` carries what a vendor needs back with the call in the next turn
    (Gemini's `thought_signature`); keep it when replaying the call."""

    id: str
    name: str
    arguments: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.meta:
            out["meta"] = self.meta
        return out


@dataclass
class Message:
    """One chat message. `tool_calls` on assistant messages, `tool_call_id`
    (and `name`) on tool results."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        calls = data.get("tool_calls")
        return cls(role=data["role"], content=data.get("content"),
                   tool_calls=[ToolCall(c.get("id") or f"call_{i}", c["name"],
                                        as_arguments(c.get("arguments")),
                                        dict(c.get("meta") or {}))
                               for i, c in enumerate(calls)] if calls else None,
                   tool_call_id=data.get("tool_call_id"), name=data.get("name"))


@dataclass
class ToolSpec:
    """A tool offered to the model: name, description, JSON Schema of parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object",
                                                                "properties": {}})


@dataclass
class LLMRequest:
    """What every provider takes. `model` is the name after the provider
    prefix (`gpt-4o` for `openai/gpt-4o`)."""

    model: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    response_format: dict[str, Any] | None = None     # a JSON Schema the answer must match
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = False
    tool_choice: str | None = None                     # "auto" | "required" | "none" | a tool name
    stop: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)   # provider-specific options

    def to_dict(self) -> dict[str, Any]:
        """Exactly what was asked, for the run record."""
        out = asdict(self)
        out["messages"] = [m.to_dict() for m in self.messages]
        return out


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        return {"prompt": self.prompt_tokens, "completion": self.completion_tokens,
                "total": self.total_tokens}


@dataclass
class Timing:
    """Epoch seconds; `first_token` is set when streaming."""

    start: float
    end: float
    first_token: float | None = None

    @property
    def duration_ms(self) -> float:
        return round((self.end - self.start) * 1000, 3)


@dataclass
class LLMResponse:
    """What every provider returns."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    timing: Timing = field(default_factory=lambda: Timing(time.time(), time.time()))
    cost: float = 0.0                 # total, USD; filled by `call_model` from the price table
    input_cost: float = 0.0
    output_cost: float = 0.0
    attempts: list[dict[str, Any]] = field(default_factory=list)   # failed tries before this one
    raw: Any = None

    def cost_dict(self) -> dict[str, float]:
        """`{input, output, total}` as the block outputs show it."""
        return {"input": self.input_cost, "output": self.output_cost, "total": self.cost}

    def to_dict(self) -> dict[str, Any]:
        """Exactly what came back, for the run record (without `raw`)."""
        return {"text": self.text, "tool_calls": [c.to_dict() for c in self.tool_calls],
                "usage": self.usage.to_dict(), "model": self.model,
                "finish_reason": self.finish_reason, "duration_ms": self.timing.duration_ms,
                "cost": self.cost_dict(),
                **({"attempts": self.attempts} if self.attempts else {})}


class Provider(abc.ABC):
    """An LLM back end. `name` is the model-string prefix (`openai`, `local`, ...)."""

    name: str = ""
    #: The `SAMPLING_OPTIONS` this back end sends when `extra` has them.
    sent_options: tuple[str, ...] = SAMPLING_OPTIONS
    #: A small embedded model: an agent's answer step is asked for in the short,
    #: constrained form its finishing tool offers (`tools.spec.GuidedAnswer`: the RAG
    #: chat's question after numbered passages), not as the whole tool call.  False
    #: for hosted models, which get the tool call as it is.
    guided_answers: bool = False

    def unsent(self, request: LLMRequest) -> dict[str, str]:
        """The settings of `request` this back end cannot send, each with why
        (`temperature`, or `extra.<key>`): the run's record leaves them out and
        says so once, so that the stored request is the one that was sent.
        A back end that drops more (a field its API refuses) adds to this."""
        return {f"extra.{key}": f"{self.name or type(self).__name__} has no `{key}` setting"
                for key in SAMPLING_OPTIONS
                if key in (request.extra or {}) and key not in self.sent_options}

    def defaults_sent(self, request: LLMRequest) -> dict[str, Any]:
        """What this back end sends for a setting `request` leaves unset (an
        API that requires `max_tokens`, a sampler's own defaults), by the
        record's names (`max_tokens`, `temperature`, `model`, `extra.<key>`):
        the run's record shows these values, as it leaves out `unsent`, so
        that the stored request is the one that was sent."""
        return {}

    @abc.abstractmethod
    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        """Answer one request. When `request.stream` and `on_delta` are set,
        call `on_delta(text)` for each text fragment as it arrives."""

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        raise ProviderError(f"embeddings are not supported by {self.name or type(self).__name__}",
                            provider=self.name)

    async def aclose(self) -> None:
        """Release connections or loaded weights (optional)."""


#: llama.cpp's JSON-Schema-to-grammar converter (the local provider's, and llama.cpp
#: servers behind openai-compatible) unrolls `maxLength: 500` into 500 nested optional
#: rules, refuses them, then crashes.  Longer string limits are left to validation (an
#: answer must not be cut); longer lists are capped, which stops a small model that
#: repeats an item until max_tokens.
_GRAMMAR_MAX_LENGTH, _GRAMMAR_MAX_ITEMS = 200, 20


def grammar_schema(schema: Any) -> Any:
    """`schema` with the limits a grammar can carry; the tool's arguments are still
    validated against the full schema before any call."""
    if isinstance(schema, list):
        return [grammar_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    choices = _bounded_choices(schema)
    if choices is not None:
        return {"enum": choices}
    out = {}
    for key, value in schema.items():
        if key in ("maxLength", "minLength") and isinstance(value, int) and \
                value > _GRAMMAR_MAX_LENGTH:
            continue
        if key == "minItems" and isinstance(value, int) and value > _GRAMMAR_MAX_ITEMS:
            continue
        if key == "maxItems" and isinstance(value, int) and value > _GRAMMAR_MAX_ITEMS:
            value = _GRAMMAR_MAX_ITEMS
        out[key] = value if key in ("const", "enum", "default", "examples") \
            else grammar_schema(value)
    return out


#: Most values a bounded number becomes in a grammar (see `_bounded_choices`).
_GRAMMAR_MAX_CHOICES = 128
#: The steps a bounded `number` is offered in, finest first.
_GRAMMAR_STEPS = (0.05, 0.1, 0.25, 0.5, 1)


def _bounded_choices(schema: dict[str, Any]) -> list[float | int] | None:
    """The values a grammar offers for a number with bounds, else None.
    llama.cpp's grammars ignore `minimum`/`maximum`, so a small model wrote a
    confidence of 1e15 where at most 1 is accepted, and scores of 90 on a scale
    of 0 to 10, again at the repair (issue 47): an integer range of at most 128
    values becomes those values, and a number between bounds the finest steps
    that give at most 128 values (0.05 between 0 and 1, 0.1 between 0 and 10,
    1 between 0 and 100); a wider range is left to validation."""
    kind, low, high = schema.get("type"), schema.get("minimum"), schema.get("maximum")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (low, high)) \
            or high < low or "enum" in schema or "const" in schema:
        return None
    if kind == "integer" and int(high) - int(low) < _GRAMMAR_MAX_CHOICES:
        return list(range(int(math.ceil(low)), int(math.floor(high)) + 1))
    if kind != "number":
        return None
    for step in _GRAMMAR_STEPS:
        count = int(math.floor((high - low) / step + 1e-9))
        if count + 1 <= _GRAMMAR_MAX_CHOICES:
            values = {round(low + i * step, 2) for i in range(count + 1)} | {low, high}
            return sorted({int(v) if float(v).is_integer() else v for v in values})
    return None


def check_model_requests_allowed(provider: str) -> None:
    if not ALLOW_MODEL_REQUESTS:
        raise ProviderError("model requests are disabled (providers.base.ALLOW_MODEL_REQUESTS "
                            "is False, as in tests); use a scripted/ model", provider=provider)


def is_loopback_url(url: str | None) -> bool:
    """True when `url` points at this machine: such a server is not a model API
    leaving the machine, so `ALLOW_MODEL_REQUESTS` does not apply to it."""
    if not url:
        return False
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require(env: Mapping[str, str], provider: str, *names: str) -> str:
    """The first of `names` set in `env`, else `MissingCredentials` naming the first."""
    for name in names:
        if env.get(name):
            return env[name]
    raise MissingCredentials(provider, names[0])


def as_arguments(value: Any) -> dict[str, Any]:
    """A tool call's arguments as a mapping, whether the back end sent a
    mapping or a JSON string (not JSON: `{"_raw": text}`); every provider module
    reads them through here."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            return {"_raw": value}
        return parsed if isinstance(parsed, dict) else {"value": parsed}
    return {}
