"""An answer cut short is never stored as the answer (issue 41), whatever the
provider: a real loopback server answers over HTTP/1.1 with neither
Content-Length nor chunked encoding, so closing the connection ends the body
and the HTTP client sees nothing wrong.  Only the answer's own end marker
(`finish_reason` / `[DONE]`, `message_stop`, `finishReason`) tells a whole
stream from a cut one; a cut one, a JSON body cut short and an error event in
the middle of a stream are retried (the consumer told the answer restarts),
then handed to the fallback model, and the block fails saying the stream was
cut when no model answers whole."""

from __future__ import annotations

import json

import pytest

import flowforge
from flowforge.providers import call as call_module
from flowforge.providers.retry import RetryPolicy

from .conftest import ClosingServer, sse_bytes

PARTIAL = "The answer is forty "
WHOLE = "The answer is forty-two."
BACKUP = "Forty-two, says the backup."


def _openai_chunk(text: str | None, finish: str | None = None) -> dict:
    delta = {"content": text} if text is not None else {}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _openai(text: str, *, whole: bool) -> list[bytes]:
    events = [(None, _openai_chunk(text[:10])), (None, _openai_chunk(text[10:]))]
    if whole:
        events += [(None, _openai_chunk(None, "stop")), (None, "[DONE]")]
    return sse_bytes(*events)


def _openai_json(text: str) -> str:
    return json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 2, "completion_tokens": 5,
                                 "total_tokens": 7}})


def _anthropic(text: str, *, whole: bool) -> list[bytes]:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-6", "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text[:10]}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text[10:]}})]
    if whole:
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                      "usage": {"output_tokens": 6}}),
                   ("message_stop", {"type": "message_stop"})]
    return sse_bytes(*events)


def _anthropic_json(text: str) -> str:
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                       "model": "claude-sonnet-4-6", "content": [{"type": "text", "text": text}],
                       "stop_reason": "end_turn", "stop_sequence": None,
                       "usage": {"input_tokens": 3, "output_tokens": 6}})


def _google_chunk(text: str, finish: str | None = None) -> dict:
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}


def _google(text: str, *, whole: bool) -> list[bytes]:
    return sse_bytes((None, _google_chunk(text[:10])),
                     (None, _google_chunk(text[10:], "STOP" if whole else None)))


def _google_json(text: str) -> str:
    return json.dumps(_google_chunk(text, "STOP"))


#: provider -> (model, environment with {url}, stream builder, JSON body builder,
#: an error event in the middle of a stream)
PROVIDERS = {
    "openai": ("openai/m", {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "{url}/v1"},
               _openai, _openai_json,
               sse_bytes((None, _openai_chunk("The answer ")),
                         (None, {"error": {"message": "server overloaded",
                                           "type": "server_error"}}))),
    "openai-compatible": ("openai-compatible/primary/m",
                          {"OPENAI_COMPATIBLE_PRIMARY_BASE_URL": "{url}/v1"},
                          _openai, _openai_json,
                          sse_bytes((None, _openai_chunk("The answer ")),
                                    (None, {"error": {"message": "server overloaded",
                                                      "code": 503}}))),
    "anthropic": ("anthropic/claude-sonnet-4-6",
                  {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": "{url}"},
                  _anthropic, _anthropic_json,
                  _anthropic(PARTIAL, whole=False)[:3] + sse_bytes(
                      ("error", {"type": "error", "error": {"type": "overloaded_error",
                                                            "message": "Overloaded"}}))),
    "google": ("google/gemini-2.5-flash",
               {"GEMINI_API_KEY": "gm-test", "GOOGLE_GEMINI_BASE_URL": "{url}"},
               _google, _google_json,
               sse_bytes((None, _google_chunk("The answer ")),
                         (None, {"error": {"code": 503, "message": "The model is overloaded.",
                                           "status": "UNAVAILABLE"}}))),
}
STREAM = "text/event-stream"


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(call_module, "DEFAULT_RETRY",
                        RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02))


async def _run(monkeypatch, provider: str, primary: ClosingServer, *, stream: bool,
               backup: ClosingServer | None = None):
    model, env, *_ = PROVIDERS[provider]
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(url=primary.url))
    block = {"prompt": "What is six times seven?", "model": model, "stream": stream}
    if backup is not None:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BACKUP_BASE_URL", f"{backup.url}/v1")
        block["fallback"] = ["openai-compatible/backup/m"]
    return await flowforge.run({"id": "ask", "blocks": [{"id": "ask", "type": "llm",
                                                         "with": block}]}, storage=False)


def _kinds(result, *kinds: str) -> list[str]:
    return [event["type"] for event in result.events if event["type"] in kinds]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_whole_answer_on_a_closed_connection_is_the_answer(monkeypatch, provider):
    """The control: the same server, the end marker sent, is an answer at once."""
    build = PROVIDERS[provider][2]
    async with ClosingServer((STREAM, build(WHOLE, whole=True))) as primary:
        result = await _run(monkeypatch, provider, primary, stream=True)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == WHOLE
    assert len(primary.requests) == 1 and _kinds(result, "llm_restart", "llm_retry") == []


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_cut_by_a_closed_connection_goes_to_the_fallback(monkeypatch, provider):
    build = PROVIDERS[provider][2]
    async with ClosingServer((STREAM, build(PARTIAL, whole=False))) as primary, \
            ClosingServer((STREAM, _openai(BACKUP, whole=True))) as backup:
        result = await _run(monkeypatch, provider, primary, stream=True, backup=backup)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == BACKUP
    assert result.results["ask"]["model"] == "openai-compatible/backup/m"
    assert len(primary.requests) == 3 and len(backup.requests) == 1     # retried, then the backup
    # Each cut answer was shown, then voided before the next one started.
    assert _kinds(result, "llm_delta", "llm_restart") == \
        ["llm_delta", "llm_delta", "llm_restart"] * 3 + ["llm_delta", "llm_delta"]
    retries = [event["error"] for event in result.events if event["type"] == "llm_retry"]
    assert len(retries) == 2 and all("the stream was cut" in error for error in retries)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_with_no_fallback_the_block_fails_saying_the_stream_was_cut(monkeypatch, provider):
    build = PROVIDERS[provider][2]
    async with ClosingServer((STREAM, build(PARTIAL, whole=False))) as primary:
        result = await _run(monkeypatch, provider, primary, stream=True)
    assert result.status == "failed"
    error = result.blocks["ask"].error
    assert "the stream was cut" in error and "3 attempts" in error, error
    assert "ask" in result.error and "the stream was cut" in result.error     # located
    assert PARTIAL not in json.dumps(result.results)
    assert len(primary.requests) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cut_stream_is_answered_by_the_retry(monkeypatch, provider):
    build = PROVIDERS[provider][2]
    async with ClosingServer((STREAM, build(PARTIAL, whole=False)),
                             (STREAM, build(WHOLE, whole=True))) as primary:
        result = await _run(monkeypatch, provider, primary, stream=True)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == WHOLE
    assert _kinds(result, "llm_restart", "llm_retry") == ["llm_restart", "llm_retry"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_json_body_cut_short_goes_to_the_fallback(monkeypatch, provider):
    body = PROVIDERS[provider][3](WHOLE)
    cut = body[: body.index(WHOLE) + 10].encode()      # the answer's text, half of it
    async with ClosingServer(("application/json", [cut])) as primary, \
            ClosingServer(("application/json", [_openai_json(BACKUP).encode()])) as backup:
        result = await _run(monkeypatch, provider, primary, stream=False, backup=backup)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == BACKUP
    assert len(primary.requests) == 3 and len(backup.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_event_mid_stream_is_retried(monkeypatch, provider):
    build, error_event = PROVIDERS[provider][2], PROVIDERS[provider][4]
    async with ClosingServer((STREAM, error_event),
                             (STREAM, build(WHOLE, whole=True))) as primary:
        result = await _run(monkeypatch, provider, primary, stream=True)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == WHOLE
    assert len(primary.requests) == 2
    assert _kinds(result, "llm_restart", "llm_retry") == ["llm_restart", "llm_retry"]


async def test_an_error_event_naming_a_bad_request_is_not_retried(monkeypatch):
    """Sending the same request again cannot succeed: the block fails at once."""
    refused = _anthropic(PARTIAL, whole=False)[:2] + sse_bytes(
        ("error", {"type": "error", "error": {"type": "invalid_request_error",
                                              "message": "prompt is too long"}}))
    async with ClosingServer((STREAM, refused)) as primary:
        result = await _run(monkeypatch, "anthropic", primary, stream=True)
    assert result.status == "failed"
    assert "prompt is too long (HTTP 400)" in result.blocks["ask"].error
    assert len(primary.requests) == 1


async def test_done_without_a_finish_reason_ends_a_stream_whole(monkeypatch):
    """`[DONE]` is an end marker too: a server that sends no finish_reason is not cut."""
    parts = sse_bytes((None, _openai_chunk(WHOLE[:10])), (None, _openai_chunk(WHOLE[10:])),
                      (None, "[DONE]"))
    async with ClosingServer((STREAM, parts)) as primary:
        result = await _run(monkeypatch, "openai-compatible", primary, stream=True)
    assert result.status == "succeeded", result.error
    assert result.results["ask"]["content"] == WHOLE and len(primary.requests) == 1
