"""The embedded model (`local/smollm2`, SmolLM2-135M through llama-cpp-python): structure,
never quality.  Prompts are tiny and max_tokens small so the module runs in seconds."""

from __future__ import annotations

import asyncio
import json
import time

import jsonschema
import pytest

from flowforge.errors import ProviderError
from flowforge.providers.base import LLMRequest, Message, ToolCall, ToolSpec
from flowforge.providers.call import call_model
from flowforge.providers._local_prompt import chat_messages as _chat_messages
from flowforge.providers.local import (DEFAULT_REPEAT_PENALTY, LocalProvider, default_model_path,
                                       default_threads, tool_answer_schema)
from flowforge.providers.resolve import ProviderOptions, resolve_model

TIME_TOOL = ToolSpec("get_time", "Current time in a timezone",
                     {"type": "object", "properties": {"timezone": {"type": "string",
                                                                    "maxLength": 30}},
                      "required": ["timezone"]})
WEATHER_TOOL = ToolSpec("get_weather", "Weather in a city",
                        {"type": "object", "properties": {"city": {"type": "string",
                                                                   "maxLength": 30}},
                         "required": ["city"]})


def ask(text, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    return LLMRequest(model="smollm2", messages=[Message("user", text)], **kw)


@pytest.fixture(scope="module")
def provider():
    provider, _ = resolve_model("local/smollm2")
    return provider


async def test_text_answer_and_usage_match_llama_cpp_own_count(provider):
    response = await provider.complete(ask("Say hello."))
    assert response.text.strip() and response.finish_reason in ("stop", "length")
    direct = provider.loaded().llama.create_chat_completion(
        [{"role": "user", "content": "Say hello."}], max_tokens=12, temperature=0,
        repeat_penalty=DEFAULT_REPEAT_PENALTY)     # flowforge's for free text
    assert response.usage.prompt_tokens == direct["usage"]["prompt_tokens"]
    assert response.usage.completion_tokens == direct["usage"]["completion_tokens"]
    assert response.text == direct["choices"][0]["message"]["content"]


async def test_streaming_hands_fragments_to_the_loop_in_order(provider):
    deltas: list[str] = []
    response = await provider.complete(ask("Count to five.", stream=True), deltas.append)
    assert len(deltas) > 1 and "".join(deltas) == response.text
    assert response.timing.first_token is not None
    assert response.timing.start <= response.timing.first_token <= response.timing.end


async def test_json_schema_is_enforced_by_the_grammar(provider):
    schema = {"type": "object",
              "properties": {"route": {"enum": ["standard", "review"]},
                             "score": {"type": "integer", "minimum": 0, "maximum": 10}},
              "required": ["route", "score"]}
    response = await provider.complete(ask("Route this refund question.", max_tokens=40,
                                           response_format=schema))
    jsonschema.validate(json.loads(response.text), schema)


async def test_required_tool_call_matches_the_tool_schema(provider):
    response = await provider.complete(ask("What time is it in Paris?", max_tokens=40,
                                           tools=[TIME_TOOL, WEATHER_TOOL],
                                           tool_choice="required"))
    assert response.tool_calls and response.finish_reason == "tool_calls"
    specs = {t.name: t for t in (TIME_TOOL, WEATHER_TOOL)}
    for call in response.tool_calls:
        jsonschema.validate(call.arguments, specs[call.name].parameters)
    assert len({c.id for c in response.tool_calls}) == len(response.tool_calls)


async def test_tool_choice_by_name_calls_only_that_tool(provider):
    response = await provider.complete(ask("Weather?", max_tokens=40,
                                           tools=[TIME_TOOL, WEATHER_TOOL],
                                           tool_choice="get_weather"))
    assert [c.name for c in response.tool_calls] == ["get_weather"]


async def test_after_a_tool_result_the_model_can_answer_in_text(provider):
    messages = [Message("user", "What time is it in Paris?"),
                Message("assistant", tool_calls=[ToolCall("call_0", "get_time",
                                                          {"timezone": "Europe/Paris"})]),
                Message("tool", "14:05", tool_call_id="call_0", name="get_time")]
    request = LLMRequest(model="smollm2", messages=messages, tools=[TIME_TOOL],
                         tool_choice="none", max_tokens=16, temperature=0, stream=True)
    deltas: list[str] = []
    response = await provider.complete(request, deltas.append)
    assert response.tool_calls == [] and response.text and "".join(deltas) == response.text
    replay = _chat_messages(request)
    assert json.loads(replay[2]["content"]) == {
        "tool_calls": [{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}]}
    assert replay[3]["role"] == "user" and "14:05" in replay[3]["content"]
    # the tools stay listed, so the system prompt is the one the tool turns had: the
    # KV cache's prefix is kept (without them every token was evaluated again)
    tools_turn = LLMRequest(model="smollm2", messages=messages, tools=[TIME_TOOL])
    assert replay[0] == _chat_messages(tools_turn)[0] and "get_time" in replay[0]["content"]


SEARCH_RESULT = {
    "chunks": ["## Delivery times and costs\n\n| Destination | Standard | Express |\n"
               "| --- | --- | --- |\n| Domestic | 4.95 EUR | 9.95 EUR |\n"
               "| European Union | 7.95 EUR | 19.95 EUR |", "Members earn 1 point per euro."],
    "scores": [0.71, 0.4],
    "metadata": [{"title": "Shipping Policy", "section": None},
                 {"title": "Loyalty Programme", "section": None}],
    "query": "express shipping"}


def test_a_tool_result_reads_as_text_each_passage_under_its_title_table_rows_whole():
    """Shown the search's JSON (escaped newlines, titles in a parallel list, a markdown
    table in a string), the 0.5B model gave the EU row's 19.95 EUR for the domestic
    express price; as text each passage is under its title and a row is one line."""
    request = LLMRequest(model="m", messages=[
        Message("user", "Express shipping cost?"),
        Message("assistant", tool_calls=[ToolCall("call_0", "search",
                                                  {"query": "express shipping"})]),
        Message("tool", json.dumps(SEARCH_RESULT), tool_call_id="call_0", name="search")])
    shown = _chat_messages(request)[2]["content"]
    assert "\\n" not in shown and "{" not in shown
    assert "express shipping" not in shown    # the call's own query, not echoed back
    lines = shown.splitlines()
    first = lines.index("[1] scores: 0.71; title: Shipping Policy")
    assert lines[first + 1] == "## Delivery times and costs"
    assert "- Domestic: Standard: 4.95 EUR; Express: 9.95 EUR" in lines
    assert "- European Union: Standard: 7.95 EUR; Express: 19.95 EUR" in lines
    assert ("[2] chunks: Members earn 1 point per euro.; scores: 0.4; title: Loyalty Programme"
            in lines)
    plain = LLMRequest(model="m", messages=[Message("tool", "14:05", tool_call_id="c",
                                                    name="get_time")])
    assert _chat_messages(plain)[0]["content"].endswith("\n14:05")     # text stays text


def test_tool_answer_schema_shapes():
    auto = tool_answer_schema([TIME_TOOL], "auto")
    assert len(auto["anyOf"]) == 2
    assert tool_answer_schema([TIME_TOOL], "none")["required"] == ["content"]
    forced = tool_answer_schema([TIME_TOOL, WEATHER_TOOL], "get_time")
    assert [c["properties"]["name"]["const"]
            for c in forced["properties"]["tool_calls"]["items"]["anyOf"]] == ["get_time"]
    with pytest.raises(ProviderError, match="tool_choice names 'nope'"):
        tool_answer_schema([TIME_TOOL], "nope")


async def test_calls_are_serialised_and_the_event_loop_stays_free(provider):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    started = time.monotonic()
    first, second = await asyncio.gather(provider.complete(ask("Hi.")),
                                         provider.complete(ask("Bye.")))
    elapsed = time.monotonic() - started
    task.cancel()
    assert first.text and second.text
    assert ticks >= elapsed / 0.01 * 0.5   # the loop kept ticking while the model ran


async def test_a_cancelled_call_stops_generating_and_frees_the_model(provider):
    long = asyncio.create_task(provider.complete(ask("Write a long story.", max_tokens=400)))
    await asyncio.sleep(0.3)
    long.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long
    started = time.monotonic()
    response = await provider.complete(ask("Hi.", max_tokens=4))
    assert response.text and time.monotonic() - started < 5


async def test_call_model_on_the_default_model_costs_nothing():
    response = await call_model("local/smollm2", ask("Hi.", max_tokens=4))
    assert response.model == "local/smollm2" and response.cost == 0
    assert response.usage.total_tokens > 0


def test_threads_default_to_one_on_two_cores():
    assert default_threads(2) == 1 and default_threads(1) == 1 and default_threads(8) is None


def test_settings_come_from_the_environment():
    provider, _ = resolve_model("local/smollm2", ProviderOptions(
        env={"FLOWFORGE_LOCAL_THREADS": "2", "FLOWFORGE_LOCAL_CONTEXT": "512"}), cache_key="t")
    assert isinstance(provider, LocalProvider)
    assert (provider.threads, provider.n_ctx) == (2, 512)
    with pytest.raises(ProviderError, match="FLOWFORGE_LOCAL_THREADS='many'"):
        resolve_model("local/smollm2", ProviderOptions(env={"FLOWFORGE_LOCAL_THREADS": "many"}),
                      cache_key="bad")


def test_a_gguf_path_is_found_next_to_the_workflow(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.gguf").symlink_to(default_model_path())
    provider, _ = resolve_model("local/models/tiny.gguf", ProviderOptions(base_dir=tmp_path))
    assert provider.path == str((tmp_path / "models" / "tiny.gguf").resolve())
    with pytest.raises(ProviderError, match="neither 'smollm2' nor an existing GGUF file"):
        resolve_model("local/missing.gguf", ProviderOptions(base_dir=tmp_path))


async def test_a_prompt_longer_than_the_context_is_a_clear_error():
    provider = LocalProvider(default_model_path(), threads=1, n_ctx=256)
    with pytest.raises(ProviderError, match="more than the local model's context of 256"):
        await provider.complete(ask("word " * 400))


def test_long_length_limits_are_left_to_validation_not_to_the_grammar():
    """llama.cpp unrolls maxLength into nested rules: 500 of them crashed the process."""
    from flowforge.providers.base import grammar_schema
    from flowforge.providers._local_prompt import compiled_grammar as _grammar

    schema = {"type": "object", "required": ["answer", "tags"],
              "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": 8000},
                             "tags": {"type": "array", "maxItems": 50, "items": {
                                 "type": "string", "maxLength": 20, "enum": ["a" * 40]}}}}
    lean = grammar_schema(schema)
    assert lean["properties"]["answer"] == {"type": "string", "minLength": 1}
    assert lean["properties"]["tags"]["maxItems"] == 20          # capped: no endless lists
    assert lean["properties"]["tags"]["items"] == {"type": "string", "maxLength": 20,
                                                   "enum": ["a" * 40]}
    assert schema["properties"]["answer"]["maxLength"] == 8000        # the original is kept
    assert _grammar(schema) is not None                                # compiles, no crash


async def test_an_agent_with_long_string_limits_runs_on_the_local_model():
    from tests.blocks_llm.helpers import run_blocks

    tool = {"function": "t_long", "parameters": {
        "type": "object", "required": ["text"],
        "properties": {"text": {"type": "string", "maxLength": 4000}}}}
    import flowforge

    @flowforge.function("t_long")
    def t_long(text: str) -> dict:
        return {"length": len(text)}

    result = await run_blocks([{"id": "a", "type": "agent", "with": {
        "model": "local/smollm2", "prompt": "Measure the word hello.", "tools": [tool],
        "tool_choice": "t_long", "max_tokens": 40, "max_iterations": 2}}])
    called = [e for e in result.events if e["type"] == "tool_called"]
    assert called and called[0]["name"] == "t_long" and called[0]["status"] == "ok"


def test_grammar_strings_refuse_raw_control_characters_as_json_does():
    from flowforge.providers._local_prompt import grammar_text

    text = grammar_text({"type": "object", "properties": {"a": {"type": "string"}},
                         "required": ["a"]})
    char_rule = next(line for line in text.splitlines() if line.startswith("char ::="))
    assert char_rule.startswith('char ::= [^"\\\\\\x7F\\x00-\\x1F] |'), char_rule


def _file_type(path: str) -> str:
    from llama_cpp import Llama

    return Llama(model_path=path, vocab_only=True, verbose=False).metadata["general.file_type"]


async def test_the_default_model_runs_from_a_q8_0_copy_made_once(tmp_path, monkeypatch):
    """The shipped Q4_1 weights are requantized once into the model cache (prompts
    evaluate ~1.5x faster in Q8_0) and the copy answers like the model."""
    monkeypatch.setenv("FLOWFORGE_MODEL_CACHE", str(tmp_path / "cache"))
    first = default_model_path()
    assert first.startswith(str(tmp_path / "cache")) and first.endswith(".gguf")
    made = (tmp_path / "cache").stat().st_mtime_ns, len(list((tmp_path / "cache").iterdir()))
    assert default_model_path() == first                            # reused, not made again
    assert ((tmp_path / "cache").stat().st_mtime_ns, len(list((tmp_path / "cache").iterdir()))
            ) == made == ((tmp_path / "cache").stat().st_mtime_ns, 1)   # no stray .part file
    assert _file_type(first) == "7"                                  # LLAMA_FTYPE_MOSTLY_Q8_0
    answer = await LocalProvider(first, threads=1, n_ctx=512).complete(LLMRequest(
        model="local/smollm2", messages=[Message("user", "Say hello.")], max_tokens=8))
    assert answer.text.strip() and answer.usage.completion_tokens > 0


def test_another_install_of_the_same_weights_reuses_the_copy(tmp_path, monkeypatch):
    """The copy is named after the weights' content: a reinstall or another
    checkout (the same file, a new time) does not build a second one."""
    import os
    import shutil

    from flowforge.providers._local_weights import faster_copy

    monkeypatch.setenv("FLOWFORGE_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLOWFORGE_LOCAL_REQUANTIZE", "0")
    shipped = default_model_path()
    monkeypatch.delenv("FLOWFORGE_LOCAL_REQUANTIZE")
    first = faster_copy(shipped)
    assert first != shipped                                         # a copy was made
    other = tmp_path / "other-install" / os.path.basename(shipped)
    other.parent.mkdir()
    shutil.copyfile(shipped, other)
    os.utime(other, (1, 1))
    assert faster_copy(str(other)) == first
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_the_shipped_file_is_kept_when_asked_or_when_no_copy_can_be_made(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_LOCAL_REQUANTIZE", "0")
    monkeypatch.setenv("FLOWFORGE_MODEL_CACHE", str(tmp_path / "cache"))
    shipped = default_model_path()
    assert shipped.endswith("SmolLM2-135M-Instruct.Q4_1.gguf") and _file_type(shipped) == "3"
    assert not (tmp_path / "cache").exists()
    monkeypatch.delenv("FLOWFORGE_LOCAL_REQUANTIZE")
    (tmp_path / "not-a-folder").write_text("")                     # the cache cannot be made
    monkeypatch.setenv("FLOWFORGE_MODEL_CACHE", str(tmp_path / "not-a-folder"))
    assert default_model_path() == shipped
