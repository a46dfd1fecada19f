"""A research session, the application's side: the orchestrator's inputs,
its outcome (`ResearchResult`) and its events.  A session is one run of the
shipped orchestrator workflow (`orchestrator.yaml`), whose three phases -
question, knowledge base, answer - are nested workflows, each a loop that
stops at a score threshold or an iteration cap; `flowforge.service.research`
starts it (`start_research`, `research`), and the CLI, the HTTP API and
Python all go through it, so they behave alike.

`ResearchEvents` turns the run's engine events into the session's own
events, the ones the WebSocket sends and the live view shows:

    status    {status: running | cancelled, phase, iteration, step, score, progress}
    phase     {phase, status: started | completed, progress, result (when completed)}
    complete  {status: succeeded, progress: 100, result}          the last event
    error     {status: failed, phase, error: {code, message}, phases}  the last event

A cancelled session ends with `status` / `cancelled`; a failed one with
`error`; either way the phases that finished are kept (`phases`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from flowforge.apps.research import PHASES
from flowforge.engine.result import RunResult
from flowforge.errors import InputError

__all__ = ["ResearchEvents", "ResearchResult", "research_result", "research_inputs",
           "brief_for", "phases_of", "PHASE_NAMES", "RESEARCH_WORKFLOW_ID", "SCORE_FIELDS", "PHASE_PERCENT"]

#: The orchestrator's workflow id: runs of it are research sessions.
RESEARCH_WORKFLOW_ID = "research"
PHASE_NAMES = tuple(name for name, _, _ in PHASES)
SCORE_FIELDS = {name: score for name, _, score in PHASES}
#: progress when each phase starts, and when it completes
PHASE_PERCENT = {"question": (0, 33), "knowledge": (33, 66), "answer": (66, 100)}
_PASS_SCOPE = re.compile(r"^(question|knowledge|answer)/develop\[(\d+)\]$")
#: a pass's bookkeeping blocks: not steps a watcher cares about
_QUIET_STEPS = frozenset({"record", "gate", "kb_gate", "current", "gather", "collect"})
#: a phase's own bookkeeping blocks (outside its passes)
_QUIET_PHASE_STEPS = frozenset({"develop", "result", "mode", "as_asked", "found",
                                "search_kb_gate"})


def brief_for(model: str | None) -> bool:
    """Whether a session on `model` (None: the default model) runs brief: the
    question as asked, one search, one guided answer from the passages.  The
    models that want guided answers (`Provider.guided_answers`: the embedded
    ones) do.  Measured on qwen2.5-0.5b (bench/local_model.py --part research):
    the full phases took minutes and their answer lost a fact the passages held."""
    from flowforge.model_strings import qualified
    from flowforge.providers.call import guided_answers
    from flowforge.providers.resolve import default_model

    name = model or default_model()
    return guided_answers(qualified(name) or name)


def research_inputs(question: str, *, threshold: float | None = None,
                    max_iterations: int | None = None, kb: str | None = None,
                    web_backend: str | None = None, web_source: str | None = None,
                    brief: bool | None = None, model: str | None = None) -> dict[str, Any]:
    """The orchestrator's inputs; what is not given keeps the workflow's default,
    but for `brief`: None decides it from `model` (`brief_for`)."""
    if not isinstance(question, str) or not question.strip():
        raise InputError(["question: the question is empty: ask something"])
    inputs: dict[str, Any] = {"question": question.strip()}
    for name, value in (("threshold", threshold), ("max_iterations", max_iterations),
                        ("kb", kb), ("web_backend", web_backend), ("web_source", web_source)):
        if value is not None:
            inputs[name] = value
    inputs["brief"] = brief_for(model) if brief is None else bool(brief)
    return inputs


@dataclass
class ResearchResult:
    """A session's outcome; finished phases are kept whatever the status."""

    session_id: str
    status: str                                    # succeeded | failed | cancelled
    original_question: str | None
    question: str | None                           # the improved question
    answer: str | None
    sources: list[Any]                             # gathered passages' URLs / document names
    scores: dict[str, float | None]                # phase's score field -> last score
    phases: dict[str, dict[str, Any]]              # finished phase -> its result
    error: str | None = None
    failed_phase: str | None = None
    iterations: dict[str, int] = field(default_factory=dict)
    #: sources the model named that no search returned: shown as such, never as sources
    unverified_sources: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def phases_of(outputs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Finished phases' results from the orchestrator's block outputs (by id)."""
    phases = {}
    for name in PHASE_NAMES:
        done = outputs.get(f"{name}_done")
        if isinstance(done, dict) and isinstance(done.get("result"), dict):
            phases[name] = done["result"]
    return phases


def research_result(result: RunResult) -> ResearchResult:
    phases = phases_of(result.results)
    failed = next((name for name in PHASE_NAMES if name in result.blocks
                   and result.blocks[name].status == "failed"), None)
    question = phases.get("question", {})
    answer = phases.get("answer", {})
    error = result.error
    if failed is not None and result.blocks[failed].error:
        error = result.blocks[failed].error
    return ResearchResult(
        session_id=result.run_id, status=result.status,
        original_question=question.get("original_question"),
        question=question.get("question"), answer=answer.get("answer"),
        sources=list(answer.get("sources") or []),
        scores={SCORE_FIELDS[name]: phases[name].get(SCORE_FIELDS[name])
                for name in PHASE_NAMES if name in phases},
        phases=phases, error=None if result.status == "succeeded" else error,
        failed_phase=failed,
        iterations={name: phases[name].get("iteration_count") for name in phases},
        unverified_sources=list(answer.get("unverified_sources") or []))


class ResearchEvents:
    """Turns a research run's engine events, in order, into session events
    (see the module docstring); `translate(event)` returns 0 or more.  Each
    carries the engine event's `seq`, so a client can resume with `after=`."""

    def __init__(self, session_id: str = "") -> None:
        self.session_id = session_id
        self.phase: str | None = None
        self.iteration: int | None = None
        self.progress = 0
        self.phases: dict[str, dict[str, Any]] = {}
        self.failed: tuple[str, str] | None = None
        self.scores: dict[str, list[float]] = {}

    def _event(self, source: dict[str, Any], kind: str, **data: Any) -> dict[str, Any]:
        return {"type": kind, "session_id": self.session_id or source.get("run_id"),
                "seq": source.get("seq"), "progress": self.progress, **data}

    def translate(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        scope = event.get("scope") or None
        block = event.get("block_id")
        if kind == "run_started":
            return [self._event(event, "status", status="running", phase=None)]
        if scope is None and block in PHASE_NAMES:
            if kind == "block_started":
                self.phase, self.iteration = block, None
                self.progress = PHASE_PERCENT[block][0]
                return [self._event(event, "phase", phase=block, status="started")]
            if kind == "block_failed":
                self.failed = (block, str(event.get("error") or "the phase failed"))
            return []
        if kind == "progress" and scope is None and event.get("phase") in PHASE_NAMES:
            phase = event["phase"]
            self.progress = int(event.get("percent") or PHASE_PERCENT[phase][1])
            result = event.get("result")
            if isinstance(result, dict):
                self.phases[phase] = result
            return [self._event(event, "phase", phase=phase, status="completed",
                                result=result, message=event.get("message"))]
        if scope in PHASE_NAMES and kind == "block_started" and \
                block not in _QUIET_PHASE_STEPS:           # a phase's own steps: plan, draft
            self.phase = scope
            return [self._event(event, "status", status="running", phase=scope,
                                iteration=None, step=block)]
        match = _PASS_SCOPE.match(scope or "")
        if match and kind in ("block_started", "block_succeeded"):
            phase, iteration = match.group(1), int(match.group(2)) + 1
            self.phase, self.iteration = phase, iteration
            data: dict[str, Any] = {"status": "running", "phase": phase,
                                    "iteration": iteration, "step": block}
            if kind == "block_started":
                return [] if block in _QUIET_STEPS else [self._event(event, "status", **data)]
            output = event.get("output") if isinstance(event.get("output"), dict) else {}
            score = SCORE_FIELDS[phase]
            if block == "evaluate" and score in output:
                self.scores.setdefault(phase, []).append(output[score])
                return [self._event(event, "status", **data, score=output[score],
                                    score_name=score, feedback=output.get("feedback"))]
            return []
        if kind == "run_error":
            self.failed = self.failed or (self.phase or "", str(event.get("error")))
            return []
        if kind == "run_finished":
            return [self._finished(event)]
        return []

    def _finished(self, event: dict[str, Any]) -> dict[str, Any]:
        status = event.get("status")
        if status == "succeeded":
            self.progress = 100
            report = (event.get("outputs") or {}).get("report") or {}
            return self._event(event, "complete", status="succeeded",
                               result=report.get("data"), phases=self.phases)
        if status == "cancelled":
            return self._event(event, "status", status="cancelled", phase=self.phase,
                               phases=self.phases, message="the session was cancelled; "
                                                           "finished phases are kept")
        phase, error = self.failed or (self.phase, str(event.get("error") or "failed"))
        return self._event(event, "error", status="failed", phase=phase or None,
                           error={"code": "phase_failed" if phase else "run_failed",
                                  "message": error}, phases=self.phases)
