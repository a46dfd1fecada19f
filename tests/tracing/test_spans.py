"""Run traces through OpenTelemetry's own in-memory exporter (issue 14): the
span tree of the support demo, GenAI attributes on model calls, content only
when asked for and redacted, traceparent into HTTP blocks, the trace id in the
run record, and nothing at all when tracing is off."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import flowforge
from flowforge.service import tracing
from flowforge.storage import storage_from_url
from tests.echo_server import echo_server, sending

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULES = f"scripted/{EXAMPLES / 'scripted' / 'support.rules.yaml'}"
QUERY = "Can I get a refund on an order I placed three weeks ago?"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(None)


def _tree(finished) -> dict[str, list[str]]:
    by_id = {span.context.span_id: span for span in finished}
    children: dict[str, list[str]] = {}
    for span in finished:
        parent = by_id.get(span.parent.span_id).name if span.parent else None
        children.setdefault(parent, []).append(span.name)
    return {key: sorted(value) for key, value in children.items()}


async def test_the_support_demo_span_tree(spans, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{tmp_path / 'kb.db'}")
    result = await flowforge.run(EXAMPLES / "support.yaml", {"query": QUERY}, model=RULES)
    assert result.status == "succeeded"
    finished = spans.get_finished_spans()
    tree = _tree(finished)
    assert tree[None] == ["flowforge.run support"]
    assert tree["flowforge.run support"] == sorted(
        f"flowforge.block {b}" for b in ("question", "search", "order_age", "timing", "window",
                                          "answer", "grade", "claim", "check", "triage",
                                          "standard", "review"))
    assert tree["flowforge.block search"] == ["knowledge.search policies"]
    model = RULES.partition("/")[2]
    for block in ("answer", "grade", "claim"):        # the router matches by embeddings
        assert tree[f"flowforge.block {block}"] == [f"chat {model}"]
    assert len({span.context.trace_id for span in finished}) == 1
    for span in finished:
        assert span.attributes["flowforge.run_id"] == result.run_id
        assert span.attributes["flowforge.workflow_id"] == "support"
        assert span.end_time >= span.start_time
    chat = next(s for s in finished if s.name.startswith("chat ") and
                s.parent.span_id == next(p for p in finished
                                         if p.name == "flowforge.block answer").context.span_id)
    assert chat.attributes["gen_ai.system"] == "scripted"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    assert "gen_ai.prompt" not in chat.attributes          # content off by default
    review = next(s for s in finished if s.name == "flowforge.block review")
    assert review.attributes["flowforge.status"] == "skipped"
    # The trace id is in the run record.
    storage = storage_from_url()
    await storage.open()
    try:
        row = await storage.get_run(result.run_id)
    finally:
        await storage.close()
    assert row["trace_id"] == format(finished[0].context.trace_id, "032x")


async def test_content_only_when_enabled_and_never_a_secret(spans, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with echo_server() as url:
        # The secret goes into a header (its only place); the answer echoes it back,
        # and the prompt reads the answer: the span must still not show it.
        document = {"id": "ask", "blocks": [
            sending("call", url, "{{secrets.TOKEN}}"),
            {"id": "ask", "type": "llm", "with": {
                "prompt": "the token is {{call.data.auth}}", "model": "scripted/echo"}}]}
        result = await flowforge.run(
            document, storage=False, secrets={"TOKEN": "tok-abcdef123"},
            model=f"scripted/{EXAMPLES / 'scripted' / 'support.rules.yaml'}")
    finished = spans.get_finished_spans()
    chat = next(s for s in finished if s.name.startswith("chat "))
    assert "***" in chat.attributes["gen_ai.prompt"]
    assert all("tok-abcdef123" not in str(dict(s.attributes)) for s in finished)
    assert result.run_id


async def test_http_blocks_carry_the_traceparent(spans):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from flowforge.tools.network import allowing_private_network
    from tests.server.conftest import serve_asgi

    seen: list[str | None] = []

    async def endpoint(request: Request) -> JSONResponse:
        seen.append(request.headers.get("traceparent"))
        return JSONResponse({"ok": True})

    url, stop = await serve_asgi(Starlette(routes=[Route("/x", endpoint)]))
    document = {"id": "calls", "blocks": [{"id": "call", "type": "http",
                                           "with": {"url": f"{url}/x"}}]}
    try:
        with allowing_private_network():
            result = await flowforge.run(document, storage=False)
    finally:
        await stop()
    assert result.status == "succeeded", result.error
    block = next(s for s in spans.get_finished_spans() if s.name == "flowforge.block call")
    assert seen == [f"00-{block.context.trace_id:032x}-{block.context.span_id:016x}-01"]


async def test_off_by_default_nothing_subscribes(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    tracing._CONFIGURED = False
    try:
        handle = await flowforge.start_run({"id": "t", "blocks": [
            {"id": "a", "type": "set", "with": {"v": 1}}]}, {}, storage=False)
        await handle.wait()
        assert handle.run.tracer is None
        assert handle.bus._subscribers == ()
    finally:
        tracing._CONFIGURED = False


async def test_webhooks_carry_the_runs_traceparent(spans, tmp_path):
    from tests.server.conftest import start_server

    posted: list[httpx.Request] = []

    def hook(request: httpx.Request) -> httpx.Response:
        posted.append(request)
        return httpx.Response(200)

    live, stop = await start_server(f"sqlite:///{tmp_path / 'db.sqlite'}", webhook_client=
                                    httpx.AsyncClient(transport=httpx.MockTransport(hook)))
    document = {"id": "hooked", "webhook": "http://hooks.invalid/x",
                "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]}
    try:
        async with live.client() as client:
            await client.post("/api/workflows", json=document)
            await client.post("/api/workflows/hooked/runs?wait=true", json={})
            import asyncio
            for _ in range(100):
                if posted:
                    break
                await asyncio.sleep(0.02)
    finally:
        await stop()
    run = next(s for s in spans.get_finished_spans() if s.name == "flowforge.run hooked")
    assert posted[0].headers["traceparent"] == \
        f"00-{run.context.trace_id:032x}-{run.context.span_id:016x}-01"
