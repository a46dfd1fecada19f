"""`scripted/<rules.yaml>`: a real provider that answers from rules, so every
LLM feature can be tested and demonstrated deterministically, offline.

    rules:                      # first match wins
      - system: "routing agent" # optional regex on the system prompt
        match: "refund"         # optional regex on the last message (user or tool result)
        reply: standard         # text, or a mapping (sent as JSON text)
      - match: "What is"
        tool_calls: [{name: knowledge_search, arguments: {query: refund policy}}]
    default: "I don't know."    # without a default, no match is an error naming the message
    latency_ms: 0               # optional delay per answer (whole file or per rule)

A rule may also give `usage: {prompt: N, completion: M}`; otherwise usage
counts whitespace tokens.  The Python twin is `FunctionProvider`: a function
`(messages, tools) -> str | dict | LLMResponse`, registered by name with
`register_script(name, fn)` and used as `scripted/<name>`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flowforge.errors import ProviderError, WorkflowError
from flowforge.providers.base import (DeltaCallback, LLMRequest, LLMResponse, Message, Provider,
                                      Timing, ToolCall, ToolSpec, Usage)
from flowforge.providers.resolve import ProviderOptions, register_check, register_provider
from flowforge.workflow.paths import resolve_path

__all__ = ["ScriptedProvider", "FunctionProvider", "ScriptRules", "Rule", "register_script",
           "unregister_script"]


class Rule(BaseModel):
    """One rule: optional regexes to match, then the answer."""

    model_config = ConfigDict(extra="forbid")

    system: str | None = None
    match: str | None = None
    tools: str | None = None            # optional regex: a tool of this name is offered
    reply: str | dict[str, Any] | list[Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    usage: dict[str, int] | None = None
    latency_ms: float | None = Field(None, ge=0)


class ScriptRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[Rule] = Field(default_factory=list)
    default: str | dict[str, Any] | list[Any] | None = None
    latency_ms: float = Field(0, ge=0)


@dataclass
class _Compiled:
    rule: Rule
    system: re.Pattern | None
    match: re.Pattern | None
    tools: re.Pattern | None


def _compile(pattern: str | None, where: str) -> re.Pattern | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern, re.IGNORECASE | re.DOTALL)
    except re.error as exc:
        raise WorkflowError(f"invalid regex {pattern!r}: {exc}", where=where) from None


def _tokens(text: str | None) -> int:
    return len(text.split()) if text else 0


def _within(text: str, max_tokens: int | None) -> tuple[str, bool]:
    """The answer cut at `max_tokens` words (a scripted token is a word), as a
    real model stops at its limit; and whether it was cut."""
    if not max_tokens or not text:
        return text, False
    pieces = re.findall(r"\S+\s*", text)
    if len(pieces) <= max_tokens:
        return text, False
    return "".join(pieces[:max_tokens]).rstrip(), True


def _text_of(reply: Any) -> str:
    if reply is None:
        return ""
    if isinstance(reply, str):
        return reply
    return json.dumps(reply, ensure_ascii=False)


class ScriptedProvider(Provider):
    """Answers from a rules file (or a `ScriptRules` object)."""

    name = "scripted"

    def __init__(self, rules: ScriptRules, source: str = "<rules>") -> None:
        self.rules = rules
        self.source = source
        self._compiled = [
            _Compiled(rule, _compile(rule.system, f"rules[{i}].system"),
                      _compile(rule.match, f"rules[{i}].match"),
                      _compile(rule.tools, f"rules[{i}].tools"))
            for i, rule in enumerate(rules.rules)]

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedProvider:
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            raise ProviderError(f"scripted rules file not found: {path}",
                                provider="scripted") from None
        except yaml.YAMLError as exc:
            raise ProviderError(f"invalid YAML in rules file {path}: {exc}",
                                provider="scripted") from None
        try:
            return cls(ScriptRules.model_validate(data), str(path))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                 for e in exc.errors())
            raise ProviderError(f"invalid rules file {path}: {problems}",
                                provider="scripted") from None

    def _choose(self, request: LLMRequest) -> Rule | None:
        system = "\n".join(m.content or "" for m in request.messages if m.role == "system")
        last = next((m for m in reversed(request.messages) if m.role != "system"), None)
        last_text = (last.content or "") if last else ""
        tool_names = " ".join(t.name for t in request.tools)
        for compiled in self._compiled:
            if compiled.system and not compiled.system.search(system):
                continue
            if compiled.match and not compiled.match.search(last_text):
                continue
            if compiled.tools and not compiled.tools.search(tool_names):
                continue
            return compiled.rule
        return None

    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        start = time.time()
        rule = self._choose(request)
        if rule is None:
            if self.rules.default is None:
                last = next((m.content for m in reversed(request.messages)
                             if m.role != "system"), "") or ""
                raise ProviderError(f"no rule in {self.source} matches the message "
                                    f"{last[:200]!r} and there is no `default:`",
                                    provider="scripted")
            reply: Any = self.rules.default
            calls: list[dict[str, Any]] = []
            latency = self.rules.latency_ms
            usage = None
        else:
            reply, calls = rule.reply, rule.tool_calls or []
            latency = rule.latency_ms if rule.latency_ms is not None else self.rules.latency_ms
            usage = rule.usage
        if latency:
            await asyncio.sleep(latency / 1000)
        text, cut = _within(_text_of(reply), request.max_tokens)
        tool_calls = [ToolCall(call.get("id") or f"call_{index}", call["name"],
                               dict(call.get("arguments") or {}))
                      for index, call in enumerate(calls)]
        if request.stream and on_delta is not None and text:
            for piece in re.findall(r"\S+\s*", text):
                on_delta(piece)
        if usage is not None:
            counted = Usage(usage.get("prompt", 0), usage.get("completion", 0))
        else:
            counted = Usage(sum(_tokens(m.content) for m in request.messages), _tokens(text))
        return LLMResponse(text=text, tool_calls=tool_calls, usage=counted, model=request.model,
                           finish_reason="tool_calls" if tool_calls else
                           "length" if cut else "stop",
                           timing=Timing(start, time.time()))


ScriptFunction = Callable[[list[Message], list[ToolSpec]], Any]


class FunctionProvider(Provider):
    """The Python twin of the rules file: a function decides each answer."""

    name = "scripted"

    def __init__(self, fn: ScriptFunction) -> None:
        self.fn = fn

    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        start = time.time()
        answer = self.fn(request.messages, request.tools)
        if asyncio.iscoroutine(answer):
            answer = await answer
        if isinstance(answer, LLMResponse):
            return answer
        if isinstance(answer, dict) and ("tool_calls" in answer or "reply" in answer):
            text = _text_of(answer.get("reply"))
            calls = [ToolCall(c.get("id") or f"call_{i}", c["name"], dict(c.get("arguments") or {}))
                     for i, c in enumerate(answer.get("tool_calls") or [])]
        else:
            text, calls = _text_of(answer), []
        text, cut = _within(text, request.max_tokens)
        if request.stream and on_delta is not None and text:
            for piece in re.findall(r"\S+\s*", text):
                on_delta(piece)
        usage = Usage(sum(_tokens(m.content) for m in request.messages), _tokens(text))
        return LLMResponse(text=text, tool_calls=calls, usage=usage, model=request.model,
                           finish_reason="tool_calls" if calls else "length" if cut else "stop",
                           timing=Timing(start, time.time()))


_SCRIPTS: dict[str, Provider] = {}


def register_script(name: str, script: ScriptFunction | ScriptRules | dict) -> None:
    """Make `scripted/<name>` answer with a function or in-memory rules."""
    if isinstance(script, dict):
        script = ScriptRules.model_validate(script)
    _SCRIPTS[name] = (ScriptedProvider(script, f"<script {name}>")
                      if isinstance(script, ScriptRules) else FunctionProvider(script))


def unregister_script(name: str) -> None:
    _SCRIPTS.pop(name, None)


def _factory(name: str, options: ProviderOptions) -> tuple[Provider, str]:
    if name in _SCRIPTS:
        return _SCRIPTS[name], name
    try:
        path = resolve_path(name, options.base_dir, "scripted rules file")
    except WorkflowError as exc:
        raise ProviderError(str(exc), provider="scripted") from None
    return ScriptedProvider.from_file(path), name


register_provider("scripted", _factory)


def _check(name: str, options: ProviderOptions) -> None:
    """The rules exist (checked at each run's start, so only looked for), found
    by the same path rule as when they are read."""
    if name in _SCRIPTS:
        return
    try:
        path = resolve_path(name, options.base_dir, "scripted rules file")
    except WorkflowError as exc:
        raise ProviderError(str(exc), provider="scripted") from None
    if not path.is_file():
        raise ProviderError(f"scripted rules file not found: {name} (looked for "
                            f"{path.resolve()})", provider="scripted")


register_check("scripted", _check)
