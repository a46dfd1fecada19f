"""Workflows that `uses:` registry blocks: schemas checked at validation
time where values are known, and always at run time."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from flowforge.engine import Run
from flowforge.errors import ValidationFailed
from flowforge.providers.scripted import register_script, unregister_script
from flowforge.service.loading import load


def workflow(*blocks, inputs=None):
    return {"version": 1, "id": "uses-test", "inputs": inputs or {}, "blocks": list(blocks)}


async def run(doc, inputs=None, **kw):
    return await Run(load(doc), inputs or {}, **kw).execute()


async def test_python_and_llm_registry_blocks_run_in_a_workflow(registry):
    register_script("uses-llm", lambda messages, tools: json.dumps(
        {"summary": "Cats purr; dogs bark.", "key_points": ["cats", "dogs"]}))
    try:
        result = await run(workflow(
            {"id": "count", "uses": "text_word_count", "with": {"text": "{{input.text}}"}},
            {"id": "sum", "uses": "llm_summarise",
             "with": {"text": "{{input.text}} ({{count.words}} words)"}},
            {"id": "out", "type": "response",
             "with": {"message": "{{sum.summary}}", "data": "{{count.top_words}}"}},
            inputs={"text": {"type": "string"}}),
            {"text": "Cats purr. Cats sleep. Dogs bark."}, model="scripted/uses-llm")
    finally:
        unregister_script("uses-llm")
    assert result.status == "succeeded", result.error
    assert result.results["count"]["words"] == 6
    assert result.results["count"]["top_words"] == ["cats", "bark", "dogs"]
    assert result.outputs["out"]["message"] == "Cats purr; dogs bark."
    assert result.usage["tokens"]["total"] > 0          # the LLM block's usage is counted
    prompts = [e for e in result.events if e["type"] == "llm_request"]
    assert "(6 words)" in prompts[0]["request"]["messages"][-1]["content"]


@pytest.mark.parametrize("block, words", [
    ({"id": "b", "uses": "text_wordcount", "with": {"text": "x"}},
     ["blocks[0].uses", "no block 'text_wordcount'", "did you mean 'text_word_count'"]),
    ({"id": "b", "uses": "text_word_count", "with": {}},
     ["blocks[0].with", "needs input 'text'"]),
    ({"id": "b", "uses": "text_word_count", "with": {"text": "x", "txt": "y"}},
     ["blocks[0].with.txt", "has no input 'txt'"]),
    ({"id": "b", "uses": "text_word_count", "with": {"text": 42}},
     ["blocks[0].with.text", "42 is not of type 'string'"]),
    ({"id": "b", "uses": "math_stats@7", "with": {"numbers": [1]}},
     ["no version 7 of block 'math_stats'"]),
    ({"id": "b", "type": "registry", "with": {}}, ["blocks[0].uses", "needs `uses:"]),
])
async def test_validation_names_the_place_and_the_fix(registry, block, words):
    with pytest.raises(ValidationFailed) as info:
        load(workflow(block))
    for word in words:
        assert word in str(info.value)


async def test_templated_inputs_are_checked_at_run_time(registry):
    result = await run(workflow(
        {"id": "src", "type": "set", "with": {"value": "not numbers"}},
        {"id": "stats", "uses": "math_stats", "with": {"numbers": "{{src.value}}"}}))
    assert result.status == "failed"
    error = result.blocks["stats"].error
    assert "inputs do not match the input schema of 'math_stats'" in error
    assert "numbers: 'not numbers' is not of type 'array'" in error


async def test_outputs_are_checked_against_the_schema_at_run_time(registry):
    await registry.add({
        "id": "liar", "name": "Liar", "description": "Returns the wrong type.",
        "execution_type": "python",
        "output_schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                          "required": ["n"]},
        "source_code": "async def execute(inputs, context):\n    return {'n': 'three'}\n"})
    result = await run(workflow({"id": "l", "uses": "liar"}))
    assert result.status == "failed"
    assert "does not match its output schema: n: 'three' is not of type 'integer'" in \
        result.blocks["l"].error


async def test_a_pinned_version_runs_that_version(registry):
    base = {"id": "greet", "name": "Greet", "description": "Greets.", "execution_type": "python",
            "source_code": "async def execute(inputs, context):\n    return {'v': 1}\n"}
    await registry.add(base)
    await registry.add({**base, "source_code": base["source_code"].replace("1}", "2}")})
    result = await run(workflow({"id": "a", "uses": "greet@1"}, {"id": "b", "uses": "greet"}))
    assert result.results["a"]["v"] == 1 and result.results["b"]["v"] == 2


async def test_a_sandbox_failure_fails_the_block_with_its_reason(registry):
    await registry.add({
        "id": "spin", "name": "Spin", "description": "Loops forever.",
        "execution_type": "python", "metadata": {"cpu_seconds": 1},
        "source_code": "async def execute(inputs, context):\n    while True:\n        pass\n"})
    result = await run(workflow({"id": "s", "uses": "spin"}))
    assert result.status == "failed"
    assert "CPU-time limit of 1 s" in result.blocks["s"].error


@pytest.fixture
def local_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"path": self.path, "papers": [{"title": "A"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_http_fetch_reaches_the_network_only_through_the_guarded_parent(
        registry, local_server, monkeypatch):
    doc = workflow({"id": "f", "uses": "http_fetch",
                    "with": {"url": f"{local_server}/papers", "params": {"q": "ai"}}})
    refused = await run(doc)                       # loopback is private: refused
    assert refused.status == "failed"
    assert "loopback, private or link-local" in refused.blocks["f"].error
    monkeypatch.setenv("FLOWFORGE_ALLOW_PRIVATE_NETWORK", "1")
    result = await run(doc)
    assert result.status == "succeeded", result.error
    assert result.results["f"]["status"] == 200
    assert result.results["f"]["body"] == {"path": "/papers?q=ai", "papers": [{"title": "A"}]}
