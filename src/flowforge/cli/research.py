"""`flowforge research "question"`: the research orchestrator in the terminal.

    flowforge research "How do I pitch a tent in wind?" --kb examples/policies \
        --web examples/web --threshold 0.8 --max-iterations 3

One run of the shipped orchestrator (`flowforge.service.research`): improve
the question, build a knowledge base from searches, write and refine the
answer.  On a terminal a live view shows the phase, the pass, each score and
a progress bar; elsewhere (a pipe, a log) the same events print as lines.
Ctrl-C cancels the run cleanly: it ends `cancelled`, the finished phases are
kept in the stored run (a second Ctrl-C quits at once).  Exit codes: 0 the
session answered, 1 it failed or was cancelled, 2 bad command line.
"""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any, Optional

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from flowforge.cli.exits import error, exit_code, fail as _fail
from flowforge.cli.options import db_option
from flowforge.errors import FlowforgeError

__all__ = ["register", "ResearchView", "render_result"]

out = Console(markup=False)
err = Console(stderr=True, soft_wrap=True, markup=False)
_BACKENDS = ("offline", "perplexity", "tavily")
_LABEL = {"question": "question", "knowledge": "knowledge base", "answer": "answer"}
_STEP = {"plan": "planning", "draft": "drafting the answer",
         "improve": "improving the question", "evaluate": "evaluating",
         "record": "recording the pass", "queries": "writing search queries",
         "web": "searching the web", "kb_gate": "searching", "kb_search":
         "searching the knowledge base", "extract": "extracting information",
         "update": "updating the knowledge base", "current": "reviewing",
         "gate": "deciding", "refine": "refining the answer",
         "search": "searching the web", "search_kb": "searching the knowledge base",
         "guided": "answering from the passages", "checked": "checking the sources"}


class ResearchView:
    """The session's events as a live table (terminal) or as lines (else)."""

    def __init__(self, console: Console) -> None:
        from flowforge.apps.research.session import PHASE_NAMES, ResearchEvents

        self.console = console
        self.events = ResearchEvents()
        self.rows = {name: {"status": "pending", "iteration": None, "scores": [],
                            "step": ""} for name in PHASE_NAMES}
        self.progress = 0
        self.note = ""
        self.live: Live | None = None

    def __enter__(self) -> "ResearchView":
        if self.console.is_terminal:
            self.live = Live(get_renderable=self.render, console=self.console,
                             refresh_per_second=8, transient=False)
            self.live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.refresh()
            self.live.stop()

    def say(self, note: str) -> None:
        self.note = note
        if self.live is None:
            self.console.print(note, highlight=False, markup=False)

    def on_event(self, event: dict[str, Any]) -> None:
        for item in self.events.translate(event):
            self._apply(item)

    def _apply(self, item: dict[str, Any]) -> None:
        self.progress = item.get("progress", self.progress)
        phase = item.get("phase")
        row = self.rows.get(phase) if phase else None
        line = None
        if item["type"] == "phase" and row is not None:
            if item["status"] == "started":
                row["status"] = "running"
                line = f"{_LABEL[phase]}: started"
            else:
                row["status"], row["step"] = "done", ""
                line = f"{_LABEL[phase]}: done{_summary(phase, item.get('result'))}"
        elif item["type"] == "status" and row is not None and item.get("step"):
            row["iteration"] = item.get("iteration") or row["iteration"]
            row["step"] = _STEP.get(item["step"], item["step"])
            if "score" in item:
                row["scores"].append(item["score"])
                line = (f"{_LABEL[phase]}: pass {item['iteration']} "
                        f"{item['score_name']} {_number(item['score'])}")
        elif item["type"] == "status" and item.get("status") == "cancelled":
            for entry in self.rows.values():
                if entry["status"] == "running":
                    entry["status"] = "cancelled"
            line = "cancelled: finished phases are kept"
        elif item["type"] == "error":
            if row is not None:
                row["status"] = "failed"
            line = f"{_LABEL.get(phase, phase or 'research')}: failed: {(item.get('error') or {}).get('message')}"
        if line is not None and self.live is None:
            self.console.print(f"[{self.progress:>3}%] {line}", highlight=False, markup=False)

    def render(self) -> Any:
        table = Table(box=None, show_header=True, header_style="bold")
        for column in ("phase", "status", "pass", "scores", "now"):
            table.add_column(column)
        style = {"pending": "dim", "running": "cyan", "done": "green", "failed": "bold red",
                 "cancelled": "magenta"}
        for name, row in self.rows.items():
            table.add_row(_LABEL[name], Text(row["status"], style=style[row["status"]]),
                          str(row["iteration"] or ""),
                          " → ".join(_number(s) for s in row["scores"]),
                          row["step"] if row["status"] == "running" else "")
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=100, completed=self.progress, width=40),
                    Text(f"{self.progress}%"))
        parts: list[Any] = [table, bar]
        if self.note:
            parts.append(Text(self.note, style="dim"))
        return Group(*parts)


def _number(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)


def _summary(phase: str, result: Any) -> str:
    if not isinstance(result, dict):
        return ""
    passes = f" after {result.get('iteration_count')} pass(es), {result.get('stopped_by')}"
    if phase == "question":
        return f"{passes}: {result.get('question')}"
    if phase == "knowledge":
        return f"{passes}: {len(result.get('knowledge') or [])} entries, " \
               f"{len(result.get('gaps') or [])} gap(s)"
    return passes


def render_result(result: Any, console: Console) -> None:
    """The answer, its sources and every phase's score."""
    if result.answer is not None:
        console.print()
        console.print(f"[bold]Question:[/] {escape(result.question)}", highlight=False,
                      soft_wrap=True, markup=True)
        console.print(result.answer, highlight=False, markup=False, soft_wrap=True)
        if result.sources:
            console.print("[dim]sources:[/]", markup=True)
            for source in result.sources:
                console.print(f"  {source}", highlight=False, markup=False)
        if result.unverified_sources:          # named by the model, returned by no search
            console.print("[dim]named in the answer but found by no search (not sources):[/]",
                          markup=True)
            for source in result.unverified_sources:
                console.print(f"  {source}", highlight=False, markup=False)
    scores = ", ".join(f"{name} {_number(value)}" for name, value in result.scores.items())
    console.print(f"[dim]{scores or 'no phase finished'}; session {result.session_id}[/]",
                  highlight=False, soft_wrap=True, markup=True)


async def _session(question: str, options: dict[str, Any], view: ResearchView) -> Any:
    from flowforge.apps.research.session import research_result
    from flowforge.service.research import start_research

    handle = await start_research(question, on_event=view.on_event, **options)
    view.events.session_id = handle.run_id
    loop = asyncio.get_running_loop()

    def interrupt() -> None:
        view.say("cancelling: the run ends cancelled, finished phases are kept "
                 "(Ctrl-C again quits at once)")
        handle.cancel()
        loop.remove_signal_handler(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
        handled = True
    except (NotImplementedError, RuntimeError, ValueError):   # not the main thread, Windows
        handled = False
    try:
        return research_result(await handle.wait())
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)


def research_command(
    question: str = typer.Argument(..., help="The research question."),
    model: Optional[str] = typer.Option(None, "--model", "-m",
                                        help="Model for every step, e.g. openai/gpt-4o "
                                             "(default: local/qwen2.5-0.5b when installed, "
                                             "else local/smollm2)."),
    threshold: Optional[float] = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                              help="Each phase stops once its score reaches "
                                                   "this (default 0.8)."),
    max_iterations: Optional[int] = typer.Option(None, "--max-iterations", min=1, max=10,
                                                 help="Passes per phase at most (default 3)."),
    kb: Optional[str] = typer.Option(None, "--kb", help="A knowledge base searched beside the "
                                     "web: a name, or a folder kept in sync with a base "
                                     "named after it."),
    web: Optional[str] = typer.Option(None, "--web", help="Where the web search looks: a "
                                      "folder or knowledge base standing in for the web "
                                      "(default: the 'web' base), perplexity or tavily."),
    brief: Optional[bool] = typer.Option(None, "--brief/--full", help="--brief: the question "
                                         "as asked, one search, one answer from the passages "
                                         "found; --full: every phase's loop (default: brief on "
                                         "the embedded local models, else full)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON, no live view."),
    user: str = typer.Option("default", "--user", "-u", help="User id."),
    db: Optional[str] = db_option(),
) -> None:
    """Research a question: improve it, build a knowledge base, write the answer."""
    if not question.strip():
        _fail("the question is empty: ask something")
    if model is not None:
        from flowforge.service.loading import model_problem
        problem = model_problem(model, "--model")
        if problem is not None:
            _fail(str(problem))
    options: dict[str, Any] = {"model": model, "threshold": threshold,
                               "max_iterations": max_iterations, "kb": kb, "user": user,
                               "storage": db, "brief": brief}
    if web in _BACKENDS:
        options["web_backend"] = web
    elif web:
        options["web_source"] = web
    try:
        from flowforge.service.research import nothing_to_search
        empty = asyncio.run(nothing_to_search(kb=kb, web_backend=options.get("web_backend"),
                                              web_source=options.get("web_source"), user=user))
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))
    if empty is not None:
        _fail(empty)
    view = ResearchView(err)
    try:
        with view:
            result = asyncio.run(_session(question, options, view))
    except KeyboardInterrupt:
        _fail("interrupted", 1)
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
    else:
        render_result(result, out)
    if result.status == "cancelled":
        err.print(f"cancelled: {', '.join(result.phases) or 'no'} phase(s) finished and kept "
                  f"(flowforge runs show {result.session_id})", highlight=False)
    elif result.status == "failed":
        error(f"the {result.failed_phase or 'research'} phase failed: {result.error}")
    raise typer.Exit(0 if result.status == "succeeded" else 1)


def register(app: typer.Typer) -> None:
    app.command("research")(research_command)
