"""The chat end to end against a real model: llama-cpp-python's OpenAI-compatible
server running the embedded SmolLM2 on 127.0.0.1 (8k context, as the chat needs),
reached through the `openai-compatible` provider exactly as an Ollama or vLLM
server would be.  A 135M model's answer is not judged here, only that the chat's
rules hold with a real model: the knowledge base is searched first (forced), and
the answer arrives through generate_response (forced on the re-ask)."""

from __future__ import annotations

import pytest

from flowforge.service.chat import ChatError, ask
from tests.script_modules import script


@pytest.fixture(scope="module")
def chat_model_server():
    with script("local_llm_server").LocalLLMServer(threads=1, n_ctx=8192) as server:
        yield server


async def test_a_real_model_follows_the_chat_rules(chat_model_server, knowledge, storage_url,
                                                   monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_LLAMA_BASE_URL", chat_model_server.base_url)
    try:
        answer = await ask("How long is the warranty on a tent?", kb="policies",
                           model="openai-compatible/llama/smollm2", storage=storage_url,
                           services={"knowledge": knowledge})
    except ChatError as exc:        # the rules held, the small model gave up: say how
        pytest.fail(f"the chat did not answer with the real model: {exc}")
    assert answer.tool_calls[0] == "knowledge_base_search"
    assert answer.tool_calls[-1] == "generate_response"
    assert answer.answer.strip()
    assert answer.session_id and answer.run_id
