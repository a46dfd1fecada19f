"""OpenTelemetry traces of runs, for the tracing system a team already runs
(Phoenix, Langfuse, Jaeger, Tempo, Datadog: all read OTLP).

One trace per run: a span for the run, one per block (children of loops,
parallel maps and nested workflows under their container), one per model
request (GenAI semantic conventions: `gen_ai.system`, `gen_ai.request.model`,
token usage, finish reasons), one per tool call and one per knowledge search.
Every span carries `flowforge.run_id` and `flowforge.workflow_id`.

Like the CLI's live view and the stored log, the tracer is a consumer of the
run's event stream, so the engine knows nothing of it; spans take the events'
own times.  It is on when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, or when a program installed a
tracer provider with `use_tracer_provider`; otherwise no subscriber exists
and a run pays nothing.  Prompt and completion text is recorded only with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, and then with
environment values and secrets already replaced by `***`.

HTTP blocks and webhooks carry the W3C `traceparent` of their span, so the
services a workflow calls join the same trace.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any, Callable

from flowforge.engine.events import STOP_EVENTS
from flowforge.model_strings import parse_model

__all__ = ["RunTracer", "tracer_for_run", "use_tracer_provider", "tracing_enabled",
           "capture_content", "flush_traced_events"]

_PROVIDER: Any = None          # the TracerProvider runs use (None: not configured yet)
_CONFIGURED = False
# (provider, its Tracer for flowforge): `get_tracer` builds a new Tracer and
# instrumentation scope each call (~60 us), a cost no run needs to pay again.
_TRACER: tuple[Any, Any] | None = None


def use_tracer_provider(provider: Any) -> None:
    """Send run traces to this OpenTelemetry TracerProvider (tests install one
    with an in-memory exporter; None turns tracing off again)."""
    global _PROVIDER, _CONFIGURED, _TRACER
    _PROVIDER, _CONFIGURED, _TRACER = provider, True, None


def _provider() -> Any:
    global _PROVIDER, _CONFIGURED
    if _CONFIGURED:
        return _PROVIDER
    _CONFIGURED = True
    if not (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        import logging

        logging.getLogger("flowforge").warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed: "
            "pip install 'flowforge[tracing]'")
        return None
    service = os.environ.get("OTEL_SERVICE_NAME", "flowforge")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))   # reads OTEL_* itself
    _PROVIDER = provider
    return provider


def tracing_enabled() -> bool:
    return _provider() is not None


def capture_content() -> bool:
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.lower() in ("1", "true", "yes")


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1_000_000_000)


class _Turn(threading.local):
    """The traced events of this thread's current loop turn, in publishing order:
    `RunTracer.defer` collects them, `flush_traced_events` makes their spans
    after the turn, all runs' together.  The same span work done in one stretch
    a turn, not between every block's own steps, costs the event loop less CPU:
    26-32 ms a round of 500 concurrent traced runs, about an eighth of what
    tracing adds there (bench/RESULTS.md, "tracing's CPU outside the subscriber")."""

    def __init__(self) -> None:
        # two lists, not one of (tracer, event) pairs: a pair is one more object
        # for the garbage collector's count (6,000 a round in bench S4)
        self.tracers: list[RunTracer] = []
        self.events: list[dict[str, Any]] = []
        self.loop: Any = None            # the loop a flush is scheduled on


_TURN = _Turn()


def flush_traced_events() -> None:
    """Hand this thread's collected events to their tracers now."""
    turn = _TURN
    while turn.events:
        tracers, events = turn.tracers, turn.events
        turn.tracers, turn.events = [], []
        for tracer, event in zip(tracers, events):
            tracer(event)


def _flush_after_turn() -> None:
    _TURN.loop = None
    flush_traced_events()


def _parent_key(scope: str) -> tuple[str, str]:
    """`refine[2]` -> ("", "refine"); `a[0]/b[1]` -> ("a[0]", "b"); a nested
    workflow's scope `call` -> ("", "call"): the container block's span key."""
    outer, _, last = scope.rpartition("/")
    return outer, last.split("[", 1)[0]


class RunTracer:
    """Builds one run's spans from its events (subscribe it to the run's bus).

    It runs on every block's two events, so what it adds to the SDK's own span
    cost is kept small: the attributes common to a run are built once, a parent's
    context is made once for all its children (not once per child), handlers are
    found in a table, and a block's span is dropped once it has ended.

    A block's span is made when something needs it, not when the block starts:
    when the block settles (then with its status among the attributes it starts
    with: one SDK call instead of a start, a `set_attribute` and its lock), or
    earlier when a span inside it starts (a model call, a tool, a loop pass's
    block) or it sends a `traceparent`.  The run's span likewise, when its first
    child or its trace id is needed: a run's start, the busiest moment when many
    runs start at once, makes no span.  A span is the same either way: it
    carries the start time of its event and the parent it had then.  (Span
    processors see `on_start` when it is made: exporters see only ended spans.)"""

    __slots__ = ("tracer", "run_id", "workflow_id", "redact", "content", "remote_parent",
                 "_run_span", "_run_started", "_run_parent", "blocks", "pending", "calls",
                 "_base", "_in_context", "_run_context", "_contexts", "_started_in")

    def __init__(self, tracer: Any, run_id: str, workflow_id: str,
                 redact: Callable[[Any], Any] = lambda data: data,
                 content: bool = False, remote_parent: str | None = None) -> None:
        from opentelemetry.trace import set_span_in_context

        self.tracer = tracer
        self.run_id = run_id
        self.workflow_id = workflow_id
        self.redact = redact
        self.content = content
        self.remote_parent = remote_parent
        self._run_span: Any = None
        self._run_started: dict[str, Any] | None = None  # run_started, until its span is made
        self._run_parent: Any = None                     # the context the run started in
        self.blocks: dict[tuple[str, str], Any] = {}     # open block spans by (scope, id)
        # started blocks whose span is not made yet: their block_started event
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: dict[tuple[str, str, int], Any] = {}
        self._base = {"flowforge.run_id": run_id, "flowforge.workflow_id": workflow_id}
        self._in_context = set_span_in_context
        self._run_context: Any = None                    # the run span as a parent
        self._contexts: dict[tuple[str, str], Any] = {}  # open container spans as parents
        self._started_in: Any = None     # the context run_started was published in (defer)

    # -- what other parts read -------------------------------------------------
    @property
    def run_span(self) -> Any:
        """The run's span (made now if the run started and it was not yet)."""
        if _TURN.events:                 # what was published before is traced first
            flush_traced_events()
        if self._run_span is None and self._run_started is not None:
            self._make_run_span()
        return self._run_span

    @property
    def trace_id(self) -> str | None:
        if self.run_span is None:
            return None
        return format(self.run_span.get_span_context().trace_id, "032x")

    def traceparent(self, block_id: str | None = None, scope: str | None = None
                    ) -> str | None:
        """The W3C `traceparent` of a block's span (else the run's)."""
        if _TURN.events:
            flush_traced_events()
        span = self._open((scope or "", block_id)) if block_id else None
        span = span or self.run_span
        if span is None:
            return None
        context = span.get_span_context()
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-01"

    # -- the subscriber ----------------------------------------------------------
    def defer(self, event: dict[str, Any]) -> None:
        """The subscriber a run's bus gets: the event is traced after the loop's
        turn (`_Turn`), with the same spans, times and parents as by `__call__`.
        What needs the spans at once does not wait: a run's end or stop (its
        spans are all ended when `run` returns), `run_span`, `trace_id`,
        `traceparent`, and a publish outside a running event loop."""
        turn = _TURN
        turn.tracers.append(self)
        events = turn.events
        events.append(event)
        kind = event["type"]
        if kind in STOP_EVENTS:       # the run's spans are all ended when it returns
            flush_traced_events()
            return
        stale = False
        if kind == "run_started":            # its parent is the publisher's context
            self._started_in = self._parent_now()
            # a run lives on one loop: the first run on this one may find events a
            # loop that closed before its flush's turn left queued
            stale = turn.loop is not None and turn.loop.is_closed()
        if len(events) == 1 or stale:        # (else a flush is due after this turn)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:             # no loop here: traced now
                flush_traced_events()
                return
            if turn.loop is not loop:        # (a stopped loop's flush may never run)
                turn.loop = loop
                loop.call_soon(_flush_after_turn)

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        try:
            # A block's two events are nearly all a run publishes: they take the
            # shortest way (no handler look-up, no call between here and the SDK).
            if kind == "block_started":
                self.pending[(event.get("scope") or "", event["block_id"])] = event
            elif (status := _SETTLED.get(kind)) is not None:
                self._settle(event, status)
            elif (handler := _HANDLERS.get(kind)) is not None:
                handler(self, event)
        except Exception:  # noqa: BLE001 - tracing must never break a run
            import logging

            logging.getLogger("flowforge").exception("tracing failed on %s", kind)

    def _attributes(self, **extra: Any) -> dict[str, Any]:
        base = dict(self._base)
        base.update({k: v for k, v in extra.items() if v is not None})
        return base

    def _open(self, key: tuple[str, str]) -> Any:
        """The span of a block that has started and not settled, made now if
        it was pending; None for a block that is not running."""
        span = self.blocks.get(key)
        if span is None and (started := self.pending.pop(key, None)) is not None:
            span = self.blocks[key] = self._block_span(started, key[0])
        return span

    def _context_of(self, key: tuple[str, str]) -> Any:
        """An open block's span as the parent of what happens inside it (made
        once per block), else the run's."""
        context = self._contexts.get(key)
        if context is None:
            span = self._open(key)
            if span is None:
                return self._run_as_parent()
            context = self._contexts[key] = self._in_context(span)
        return context

    def _start(self, name: str, context: Any, start: float, attributes: dict[str, Any]) -> Any:
        return self.tracer.start_span(name, context=context, start_time=int(start * 1e9),
                                      attributes=attributes)

    def _run_as_parent(self) -> Any:
        if self._run_context is None:
            span = self.run_span
            if span is None:
                return None
            self._run_context = self._in_context(span)
        return self._run_context

    def _parent_now(self) -> Any:
        """The run span's parent as of now: the caller's `traceparent`, else
        the current context (the caller's own span, if any)."""
        if self.remote_parent:
            from opentelemetry.trace.propagation.tracecontext import \
                TraceContextTextMapPropagator

            return TraceContextTextMapPropagator().extract({"traceparent": self.remote_parent})
        from opentelemetry.context import get_current

        return get_current()

    def _on_run_started(self, event: dict[str, Any]) -> None:
        parent, self._started_in = self._started_in, None
        self._run_parent = parent if parent is not None else self._parent_now()
        self._run_started = event

    def _make_run_span(self, finished: dict[str, Any] | None = None) -> None:
        started, self._run_started = self._run_started, None
        assert started is not None
        attributes = self._attributes(**{"flowforge.user_id": started.get("user")})
        if finished is not None:
            attributes.update(finished)
        self._run_span = self.tracer.start_span(
            f"flowforge.run {self.workflow_id}", context=self._run_parent,
            start_time=_ns(started["time"]), attributes=attributes)

    def _on_run_finished(self, event: dict[str, Any]) -> None:
        status = event.get("status")
        usage = event.get("usage") or {}
        tokens = usage.get("tokens") or {}
        finished = {"flowforge.status": status or "",
                    "gen_ai.usage.input_tokens": tokens.get("prompt", 0),
                    "gen_ai.usage.output_tokens": tokens.get("completion", 0),
                    "flowforge.cost_usd": float(usage.get("cost") or 0.0)}
        if self._run_span is None:
            if self._run_started is None:
                return
            self._make_run_span(finished)
        else:
            self._run_span.set_attributes(finished)
        if status == "failed":
            self._error(self.run_span, event.get("error"))
        end = _ns(event["time"])
        if self.pending or self.blocks or self.calls:                 # cut off (cancelled):
            for started in list(self.pending.values()):               # close what is open
                self._open((started.get("scope") or "", started["block_id"]))
            for span in (*self.calls.values(), *self.blocks.values()):
                if span.is_recording():
                    span.end(end_time=end)
            self.calls.clear()
            self.blocks.clear()
            self.pending.clear()
        self._contexts.clear()
        self._run_context = None
        self.run_span.end(end_time=end)

    def _on_run_waiting(self, event: dict[str, Any]) -> None:
        """The run stops to wait: its span ends here, with status `waiting`; the
        process that resumes it traces the rest (its `run_started`)."""
        self._on_run_finished(event)

    def _error(self, span: Any, message: Any) -> None:
        from opentelemetry.trace import Status, StatusCode

        text = str(self.redact(message) or "failed")
        span.set_status(Status(StatusCode.ERROR, text[:500]))
        span.set_attribute("error.type", "flowforge.block_failed" if span is not self._run_span
                           else "flowforge.run_failed")

    def _block_context(self, scope: str) -> Any:
        """The parent of a block's span: its container's (loop, parallel map,
        nested workflow) for a block in a scope, else the run's."""
        if not scope:
            return self._run_as_parent()
        return self._context_of(_parent_key(scope))

    def _block_span(self, started: dict[str, Any], scope: str,
                    settled: dict[str, Any] | None = None) -> Any:
        """A block's span from its `block_started` event: made before it settles
        when something inside it needs it as a parent, else as it settles, with
        `settled` (its status, a skip reason) among the attributes it starts with
        (one dict, one SDK call)."""
        block_id = started["block_id"]
        attributes = {**self._base, "flowforge.block_id": block_id}
        if (block_type := started.get("block_type")) is not None:
            attributes["flowforge.block_type"] = block_type
        if scope:
            attributes["flowforge.scope"] = scope
        if settled is not None:
            attributes.update(settled)
        return self._start(f"flowforge.block {block_id}", self._block_context(scope),
                           started["time"], attributes)

    def _settle(self, event: dict[str, Any], status: str) -> None:
        """A block settled: its span, made now with every attribute it ends with,
        else the one made earlier, gets its status."""
        scope = event.get("scope") or ""
        key = (scope, event["block_id"])
        settled = {"flowforge.status": status}
        if status == "skipped" and event.get("reason"):
            settled["flowforge.skip_reason"] = str(event["reason"])
        span = self.blocks.pop(key, None)
        if span is None:                 # made now; skipped before starting: zero-length
            span = self._block_span(self.pending.pop(key, None) or event, scope, settled)
        else:                            # made earlier: it was a parent or sent a traceparent
            self._contexts.pop(key, None)
            span.set_attributes(settled)
        if status == "failed":
            self._error(span, event.get("error"))
        span.end(end_time=int(event["time"] * 1e9))

    def _on_llm_request(self, event: dict[str, Any]) -> None:
        scope = event.get("scope") or ""
        model = str(event.get("model") or "")
        parsed = parse_model(model)
        system, name = parsed.provider, parsed.name
        request = event.get("request") or {}
        span = self._start(
            f"chat {name or model}", self._context_of((scope, event.get("block_id", ""))),
            event["time"], self._attributes(**{
                "gen_ai.operation.name": "chat", "gen_ai.system": system or None,
                "gen_ai.request.model": name or model,
                "gen_ai.request.temperature": request.get("temperature"),
                "gen_ai.request.max_tokens": request.get("max_tokens"),
                "flowforge.purpose": event.get("purpose")}))
        if self.content:
            span.set_attribute("gen_ai.prompt", json.dumps(
                self.redact(request.get("messages")), ensure_ascii=False, default=str))
        self.calls[(scope, event.get("block_id", ""), event.get("call", 0))] = span

    def _on_llm_response(self, event: dict[str, Any]) -> None:
        key = (event.get("scope") or "", event.get("block_id", ""), event.get("call", 0))
        span = self.calls.pop(key, None)
        if span is None:
            return
        response = event.get("response")
        if response is None:
            self._error(span, event.get("error"))
        else:
            usage = response.get("usage") or {}
            span.set_attribute("gen_ai.usage.input_tokens", usage.get("prompt", 0))
            span.set_attribute("gen_ai.usage.output_tokens", usage.get("completion", 0))
            if response.get("model"):
                span.set_attribute("gen_ai.response.model", str(response["model"]))
            if response.get("finish_reason"):
                span.set_attribute("gen_ai.response.finish_reasons",
                                   [str(response["finish_reason"])])
            if self.content:
                span.set_attribute("gen_ai.completion", json.dumps(
                    self.redact({"text": response.get("text"),
                                 "tool_calls": response.get("tool_calls")}),
                    ensure_ascii=False, default=str))
        span.end(end_time=_ns(event["time"]))

    def _finished_span(self, event: dict[str, Any], name: str, **attributes: Any) -> Any:
        """A span for something a block reports once it is over (with its duration)."""
        duration = float(event.get("duration_ms") or 0.0) / 1000
        context = self._context_of((event.get("scope") or "", event.get("block_id", "")))
        return self._start(name, context, event["time"] - duration,
                           self._attributes(**attributes))

    def _on_tool_called(self, event: dict[str, Any]) -> None:
        span = self._finished_span(event, f"execute_tool {event.get('name')}",
                                   **{"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": event.get("name"),
                                      "flowforge.tool_status": event.get("status")})
        if event.get("status") not in (None, "ok"):
            self._error(span, event.get("result") or event.get("status"))
        span.end(end_time=_ns(event["time"]))

    def _on_knowledge_searched(self, event: dict[str, Any]) -> None:
        span = self._finished_span(event, f"knowledge.search {event.get('knowledge_base')}",
                                   **{"flowforge.knowledge_base": event.get("knowledge_base"),
                                      "flowforge.search_mode": event.get("mode"),
                                      "flowforge.results": event.get("results")})
        if self.content and event.get("query") is not None:
            span.set_attribute("flowforge.query", str(self.redact(event["query"])))
        span.end(end_time=_ns(event["time"]))


# the events that settle a block -> the status its span ends with
_SETTLED = {"block_succeeded": "succeeded", "block_failed": "failed",
            "block_skipped": "skipped", "block_cancelled": "cancelled",
            "block_waiting": "waiting"}

# any other event type -> its handler: one dictionary look-up per event
_HANDLERS: dict[str, Callable[[RunTracer, dict[str, Any]], None]] = {
    name[len("_on_"):]: handler for name, handler in vars(RunTracer).items()
    if name.startswith("_on_")}


def tracer_for_run(run_id: str, workflow_id: str, redact: Callable[[Any], Any],
                   remote_parent: str | None = None) -> RunTracer | None:
    """A tracer for one run, or None when tracing is off (then nothing subscribes)."""
    global _TRACER
    provider = _provider()
    if provider is None:
        return None
    if _TRACER is None or _TRACER[0] is not provider:
        from flowforge import __version__

        _TRACER = (provider, provider.get_tracer("flowforge", __version__))
    return RunTracer(_TRACER[1], run_id, workflow_id,
                     redact=redact, content=capture_content(), remote_parent=remote_parent)
