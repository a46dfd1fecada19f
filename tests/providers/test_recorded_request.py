"""The stored request is the request that was sent (issue 41): a setting a
provider cannot send (Claude's temperature, a sampling option an API lacks) is
left out of the run's recorded request and named once per run and block in a
`warning` event.  Each provider's SDK runs on an httpx2.MockTransport, so the
body that reached the wire is compared with what the run recorded."""

from __future__ import annotations

import dataclasses
import json

import httpx2
import pytest

import flowforge
from flowforge.blocks._llm import sent_requests
from flowforge.providers import call as call_module
from flowforge.providers import resolve
from flowforge.providers.base import SAMPLING_OPTIONS, LLMRequest, Message, ToolSpec
from flowforge.providers.retry import RetryPolicy

from .conftest import Recorder

OPTIONS = {"seed": 7, "top_p": 0.9, "top_k": 20, "min_p": 0.1, "presence_penalty": 0.1,
           "frequency_penalty": 0.2, "repeat_penalty": 1.1, "reasoning_effort": "low",
           "parallel_tool_calls": False, "user": "u-1"}


def _claude(text: str = "Forty-two.") -> httpx2.Response:
    return httpx2.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 3}})


def _openai(text: str = "Forty-two.") -> httpx2.Response:
    return httpx2.Response(200, json={
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})


def _gemini(text: str = "Forty-two.") -> httpx2.Response:
    return httpx2.Response(200, json={
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3},
        "modelVersion": "gemini-2.5-flash"})


@pytest.fixture
def via(monkeypatch, allow_model_requests):
    """`via(prefix, recorder)`: that provider's SDK talks to `recorder`."""
    def install(prefix: str, recorder: Recorder) -> Recorder:
        module = __import__(resolve._BUILTIN[prefix], fromlist=["_factory"])
        monkeypatch.setitem(resolve._FACTORIES, prefix,
                            lambda name, options: module._factory(
                                name, options, http_client=recorder.client()))
        return recorder
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")
    return install


def _document(model: str, block: dict | None = None, **defaults) -> dict:
    return {"id": "ask", "defaults": defaults, "blocks": [{"id": "ask", "type": "llm", "with": {
        "prompt": "What is six times seven?", "system": "Be brief.", "model": model,
        "temperature": 0.3, "max_tokens": 100, **(block or {})}}]}


def _warnings(result) -> list[dict]:
    return [event for event in result.events if event["type"] == "warning"]


async def test_a_claude_request_is_recorded_as_it_reached_the_api(via):
    from flowforge.providers.anthropic import AnthropicProvider

    recorder = via("anthropic", Recorder(_claude()))
    result = await flowforge.run(_document("anthropic/claude-sonnet-4-6",
                                           provider_options={"seed": 7}), storage=False)
    assert result.status == "succeeded", result.error
    body = recorder.body()
    [recorded] = sent_requests(result.events, "ask")
    assert recorded["temperature"] is None and "seed" not in recorded["extra"]
    # The record, sent again, is the very body that reached the API.
    again = LLMRequest(model=recorded["model"], stream=recorded["stream"],
                       messages=[Message.from_dict(m) for m in recorded["messages"]],
                       temperature=recorded["temperature"], max_tokens=recorded["max_tokens"],
                       stop=recorded["stop"], extra=recorded["extra"])
    assert AnthropicProvider(client=None).arguments(again) == body
    [warning] = _warnings(result)
    assert warning["block_id"] == "ask" and warning["model"] == "anthropic/claude-sonnet-4-6"
    assert sorted(warning["settings"]) == ["extra.seed", "temperature"]
    assert "temperature" in warning["message"] and "not sent" in warning["message"]


async def test_the_warning_comes_once_per_run_and_block(via):
    via("anthropic", Recorder(_claude(), _claude(), _claude()))
    document = {"id": "loop", "blocks": [{"id": "rep", "type": "loop", "with": {"times": 3},
                                          "blocks": _document("anthropic/m")["blocks"]}]}
    result = await flowforge.run(document, storage=False)
    assert result.status == "succeeded", result.error
    assert len([e for e in result.events if e["type"] == "llm_request"]) == 3
    assert [w["settings"] for w in _warnings(result)] == [["temperature"]]


async def test_a_fallback_that_could_not_take_a_setting_is_named(via, monkeypatch):
    """The record is the block model's request (it takes temperature); the Claude
    fallback that answered did not get it, and the warning says so."""
    monkeypatch.setattr(call_module, "DEFAULT_RETRY", RetryPolicy(attempts=1))
    via("openai", Recorder(httpx2.Response(503, json={"error": {"message": "down"}})))
    via("anthropic", Recorder(_claude()))
    result = await flowforge.run(_document("openai/gpt-4o",
                                           {"fallback": ["anthropic/claude-sonnet-4-6"]}),
                                 storage=False)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["model"] == "anthropic/claude-sonnet-4-6"
    assert sent_requests(result.events, "ask")[0]["temperature"] == 0.3
    assert [(w["model"], w["settings"]) for w in _warnings(result)] == [
        ("anthropic/claude-sonnet-4-6", ["temperature"])]


def _sent_settings(prefix: str, body: dict) -> set[str]:
    """Our names of the sampling settings in a provider's wire body."""
    if prefix == "google":
        names = {"topP": "top_p", "topK": "top_k"}
        return {names.get(key, key) for key in body.get("generationConfig", {})} & \
            {"temperature", *SAMPLING_OPTIONS}
    return set(body) & {"temperature", *SAMPLING_OPTIONS}


@pytest.mark.parametrize("model, answer", [
    ("openai/gpt-4o", _openai), ("openai/o3-mini", _openai),
    ("anthropic/claude-sonnet-4-6", _claude), ("google/gemini-2.5-flash", _gemini)])
async def test_every_provider_records_exactly_the_settings_it_sent(via, model, answer):
    prefix = model.partition("/")[0]
    recorder = via(prefix, Recorder(answer()))
    result = await flowforge.run(_document(model, provider_options=OPTIONS), storage=False)
    assert result.status == "succeeded", result.error
    sent = _sent_settings(prefix, recorder.body())
    [recorded] = sent_requests(result.events, "ask")
    kept = {key for key in recorded["extra"] if key in SAMPLING_OPTIONS} | \
        ({"temperature"} if recorded["temperature"] is not None else set())
    assert kept == sent
    warned = {setting.removeprefix("extra.") for w in _warnings(result)
              for setting in w["settings"]}
    assert warned == {"temperature", *OPTIONS} - sent
    # the comparison is not empty on both sides: each sends some, except Claude
    assert bool(sent) == (prefix != "anthropic")


def test_local_and_replicate_name_what_they_do_not_send():
    """No HTTP to compare for these two: their `unsent` against their own code."""
    from flowforge.providers.local import LocalProvider
    from flowforge.providers.replicate import ReplicateProvider

    request = LLMRequest(model="m", messages=[Message("user", "hi")], temperature=0.2,
                         extra=dict(OPTIONS), tools=[ToolSpec("t", "a tool")])
    assert set(LocalProvider("m.gguf").unsent(request)) == {
        "extra.presence_penalty", "extra.frequency_penalty", "extra.reasoning_effort",
        "extra.user"}
    replicate = ReplicateProvider("r8-test")
    assert set(replicate.unsent(request)) == {f"extra.{key}" for key in OPTIONS}
    inputs = replicate._inputs(dataclasses.replace(request, tools=[]))
    assert inputs["temperature"] == 0.2 and not set(inputs) & set(OPTIONS)
    assert json.dumps(inputs)


def test_the_command_line_shows_the_warning_live_and_in_the_stored_log(via, tmp_path):
    from tests.in_process import flowforge as cli

    via("anthropic", Recorder(_claude()))
    document = tmp_path / "ask.json"
    document.write_text(json.dumps(_document("anthropic/claude-sonnet-4-6")))
    env = {"FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}
    ran = cli("run", str(document), env=env)
    assert ran.returncode == 0, ran.stderr
    said = "anthropic/claude-sonnet-4-6 cannot take temperature"
    assert f"warning: ask: {said}" in " ".join((ran.stdout + ran.stderr).split())
    run_id = json.loads(cli("runs", "list", "--json", env=env).stdout)[0]["run_id"]
    shown = cli("runs", "show", run_id, "--events", env=env)
    assert said in " ".join(shown.stdout.split())


def test_the_models_guide_lists_what_each_provider_cannot_take():
    import re
    from pathlib import Path

    from flowforge.providers.anthropic import AnthropicProvider
    from flowforge.providers.google import GoogleProvider
    from flowforge.providers.local import LocalProvider
    from flowforge.providers.openai import OpenAIChatProvider
    from flowforge.providers.replicate import ReplicateProvider

    classes = {"anthropic": AnthropicProvider, "openai": OpenAIChatProvider,
               "openai-compatible": OpenAIChatProvider, "google": GoogleProvider,
               "local": LocalProvider, "replicate": ReplicateProvider}
    guide = (Path(__file__).parents[2] / "docs/guides/models.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (.+) \|$", guide, re.M))
    for prefix, cls in classes.items():
        row = rows[prefix]
        listed = set(SAMPLING_OPTIONS) if "every sampling key" in row else \
            set(re.findall(r"`(\w+)`", row)) & set(SAMPLING_OPTIONS)
        assert listed == set(SAMPLING_OPTIONS) - set(cls.sent_options), prefix
