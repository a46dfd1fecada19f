"""A setting the block leaves unset but the provider sends anyway (Claude's
required `max_tokens: 4096`, the json_schema wrapper's `strict: false`, the
local sampler's defaults, an openai-compatible server's model from its
variable) is in the stored request with the value sent, not `null` (issue
41: the stored request is the request that was sent).  The reverse case,
settings not sent, is tests/providers/test_recorded_request.py."""

from __future__ import annotations

import httpx2
import pytest

import flowforge
from flowforge.blocks._llm import sent_requests
from flowforge.providers import resolve
from flowforge.providers.base import LLMRequest, Message

from .conftest import Recorder
from .test_recorded_request import _claude, _gemini, _openai

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture
def via(monkeypatch, allow_model_requests):
    def install(prefix: str, recorder: Recorder) -> Recorder:
        module = __import__(resolve._BUILTIN[prefix], fromlist=["_factory"])
        if prefix == "openai-compatible":
            factory = lambda name, options: (module.OpenAICompatibleProvider(  # noqa: E731
                name.partition("/")[0], options.env, http_client=recorder.client()),
                name.partition("/")[2])
        else:
            factory = lambda name, options: module._factory(  # noqa: E731
                name, options, http_client=recorder.client())
        monkeypatch.setitem(resolve._FACTORIES, prefix, factory)
        return recorder
    for name, value in {"ANTHROPIC_API_KEY": "sk-ant-test", "OPENAI_API_KEY": "sk-test",
                        "GEMINI_API_KEY": "gm-test"}.items():
        monkeypatch.setenv(name, value)
    return install


def _ask(model: str, **with_) -> dict:
    return {"id": "ask", "blocks": [{"id": "ask", "type": "llm", "with": {
        "prompt": "What is six times seven?", "model": model, **with_}}]}


def _wire(prefix: str, body: dict) -> dict:
    """The settings in a provider's wire body, by the record's names."""
    if prefix == "anthropic":
        return {"max_tokens": body.get("max_tokens"), "temperature": body.get("temperature")}
    if prefix == "google":
        config = body.get("generationConfig", {})
        return {"max_tokens": config.get("maxOutputTokens"),
                "temperature": config.get("temperature")}
    wrapper = (body.get("response_format") or {}).get("json_schema") or {}
    return {"max_tokens": body.get("max_completion_tokens", body.get("max_tokens")),
            "temperature": body.get("temperature"),
            "extra.schema_name": wrapper.get("name"), "extra.strict": wrapper.get("strict")}


@pytest.mark.parametrize("model, answer, schema", [
    ("anthropic/claude-sonnet-4-6", _claude, None),
    ("openai/gpt-4o", _openai, None), ("google/gemini-2.5-flash", _gemini, None),
    ("openai/gpt-4o", lambda: _openai('{"n": 42}'), SCHEMA),
], ids=["anthropic", "openai", "google", "openai-json-schema"])
async def test_what_a_provider_sends_unasked_is_recorded(via, model, answer, schema):
    prefix = model.partition("/")[0]
    recorder = via(prefix, Recorder(answer()))
    result = await flowforge.run(_ask(model, **({"output_schema": schema} if schema else {})),
                                 storage=False)
    assert result.status == "succeeded", result.error
    [recorded] = sent_requests(result.events, "ask")
    flat = {**recorded, **{f"extra.{k}": v for k, v in recorded["extra"].items()}}
    assert {key: flat.get(key) for key in _wire(prefix, recorder.body())} == \
        _wire(prefix, recorder.body())
    if prefix == "anthropic":
        assert recorded["max_tokens"] == 4096


async def test_an_openai_compatible_model_named_by_its_variable_is_recorded(via, monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_MYSERVER_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_COMPATIBLE_MYSERVER_MODEL", "qwen-7b")
    recorder = via("openai-compatible", Recorder(_openai()))
    result = await flowforge.run(_ask("openai-compatible/myserver"), storage=False)
    assert result.status == "succeeded", result.error
    assert recorder.body()["model"] == "qwen-7b"
    assert sent_requests(result.events, "ask")[0]["model"] == "qwen-7b"


@pytest.mark.parametrize("request_, structured", [
    (LLMRequest(model="m", messages=[Message("user", "hi")]), False),
    (LLMRequest(model="m", messages=[Message("user", "hi")], response_format=SCHEMA), True),
    (LLMRequest(model="m", messages=[Message("user", "hi")], temperature=0.7, max_tokens=30,
                extra={"top_k": 5}), False),
], ids=["free-text", "grammar", "given"])
def test_the_local_sampler_defaults_are_what_generate_passes(request_, structured):
    """No HTTP here: llama.cpp's `create_completion` is faked and its keyword
    arguments compared with `defaults_sent` over the request."""
    import threading
    from types import SimpleNamespace

    from flowforge.providers._local_states import StateCache
    from flowforge.providers.local import LocalProvider

    seen: dict = {}

    def create_completion(**kwargs):
        seen.update(kwargs)
        yield {"choices": [{"text": "{}", "finish_reason": "stop"}]}     # a generator: closable

    llama = SimpleNamespace(tokenize=lambda *a, **k: [1, 2, 3], n_tokens=4,
                            create_completion=create_completion,
                            _input_ids=SimpleNamespace(tolist=lambda: []))
    loaded = SimpleNamespace(llama=llama, lock=threading.Lock(), states=StateCache(0),
                             format=lambda messages: SimpleNamespace(
                                 prompt="hi", stop=None, added_special=False,
                                 stopping_criteria=None))
    provider = LocalProvider("m.gguf")
    grammar = object() if structured else None
    provider._generate(loaded, request_, grammar, None, threading.Event())
    record = {"temperature": request_.temperature, "max_tokens": request_.max_tokens,
              **{f"extra.{k}": v for k, v in request_.extra.items()},
              **provider.defaults_sent(request_)}
    for key in ("temperature", "max_tokens", "extra.top_p", "extra.top_k", "extra.min_p",
                "extra.repeat_penalty"):
        assert record[key] == seen[key.removeprefix("extra.")], key
