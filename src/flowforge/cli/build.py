"""`flowforge build "what you want"`: clarify, build, and (optionally) run.

    flowforge build "every morning summarise the three most-discussed AI papers" \
        --model openai/gpt-4o -o digest.pipeline.json
    flowforge build "Count the words of a text and summarise it" --yes --run -i text=@notes.txt

The clarifier asks its questions in the terminal (one per turn, at most
three answers) unless `--yes`; the build's progress is printed to stderr;
the Pipeline JSON goes to `--output` (or stdout); `--run` runs it at once
with `--input` values.  `flowforge run FILE.json` runs a saved pipeline.
Exit codes: 0 built (and run) fine, 1 the build or the run failed, 2 bad
command line.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from flowforge.cli.exits import fail
from flowforge.errors import FlowforgeError
from flowforge.model_strings import parse_model

__all__ = ["build_command", "register", "describe_event", "local_model_note"]

out = Console(markup=False)
err = Console(stderr=True, markup=False)


def describe_event(event: dict[str, Any]) -> str | None:
    """One line for the terminal, as markup whose data (names, errors) is escaped
    (None: not worth a line)."""
    kind = event["type"]
    name = escape(str(event.get("name", "")))
    if kind == "stage":
        return f"[bold]== {escape(str(event['stage']))}[/]"
    if kind == "decompose_blocks":
        return "plan: " + escape(", ".join(f"{b['name']} ({b['execution_type']})"
                                           for b in event["blocks"]))
    if kind == "search_found":
        return f"  found {escape(str(event['required']))} -> {escape(str(event['block_id']))}"
    if kind == "search_missing":
        return f"  missing {escape(str(event['required']))} (will write it)"
    if kind == "creating_block":
        return f"  writing {name} (attempt {event['attempt']})"
    if kind == "block_test_failed":
        return f"  [red]test failed[/] {name}: {escape(str(event['error'])[:300])}"
    if kind == "block_test_passed":
        return f"  [green]test passed[/] {name}"
    if kind == "block_created":
        return (f"  saved {escape(str(event['block_id']))} v{event['version']} "
                f"(created_by: thinker)")
    if kind == "block_create_failed":
        return f"  [red]gave up on[/] {name} after {event['attempts']} attempts"
    if kind == "validation":
        what = "plan" if event.get("stage") == "decompose" else "wiring"
        return f"  {what} valid" if event["ok"] else \
            f"  [red]{what} invalid[/]: " + escape("; ".join(event["problems"])[:400])
    if kind == "complete":
        return "[green]built[/]" if event["ok"] else \
            f"[red]build failed:[/] {escape(str(event['error']))}"
    return None


def has_terminal() -> bool:
    """Whether someone can answer the clarifier's questions."""
    import sys

    return sys.stdin.isatty()


def _clarify_interactively(intent: str, model: str | None) -> str:
    from flowforge.apps.thinker import clarify

    conversation = [{"role": "user", "content": intent}]
    while True:
        result = asyncio.run(clarify(conversation, model=model))
        if result.ready:
            err.print(f"[bold]Intent[/]\n{escape(result.refined_intent or '')}", highlight=False,
                      markup=True)
            return result.refined_intent or intent
        answer = typer.prompt(result.question or "Tell me more", err=True)
        conversation += [{"role": "assistant", "content": result.question or ""},
                         {"role": "user", "content": answer}]


#: The note before a build on a local model says which model it is about (by any of
#: its names) and what it can build (bench/RESULTS.md, issue 47).
_LOCAL_NOTES = {
    "smollm2": "SmolLM2-135M-Instruct, 135M parameters) plans poorly: builds with it "
               "often fail",
    "qwen2.5-0.5b": "Qwen2.5-Coder-0.5B-Instruct, 0.5B parameters) is a small model: it "
                    "builds one-block pipelines (a word count, a unit conversion) in about a "
                    "minute and plans anything longer poorly",
}
_SMOLLM2_NAMES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct")


def local_model_note(model: str) -> str:
    """The note printed before a build on `model` (a `local/` model string)."""
    from flowforge.providers.local_models import find

    name = parse_model(model).name.lower()
    weights = find(name)
    key = "smollm2" if name in _SMOLLM2_NAMES else weights.name if weights else None
    about = f"({_LOCAL_NOTES[key]}" if key in _LOCAL_NOTES else \
        "is an embedded model that may plan poorly"
    return (f"{model} {about}. Build with a hosted model (--model openai/gpt-4o, "
            f"anthropic/claude-sonnet-4-5, google/gemini-2.5-flash), a strong Ollama coder "
            f"model (--model openai-compatible/ollama/qwen2.5-coder:14b), or set "
            f"FLOWFORGE_BUILD_MODEL once.")


def build_command(
    intent: str = typer.Argument(..., help="What to automate, in a sentence."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model that plans and "
                                        "writes blocks (default: FLOWFORGE_BUILD_MODEL, else the "
                                        "default model)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Skip the clarifying questions."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Write the Pipeline JSON here."),
    run: bool = typer.Option(False, "--run", help="Run the pipeline once it is built."),
    input: List[str] = typer.Option([], "--input", "-i", help="Run input as name=value."),
    user: str = typer.Option("default", "--user", "-u", help="User id (per-user memory)."),
    as_json: bool = typer.Option(False, "--json", help="Print the build (and run) as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Build a pipeline from a sentence: clarify, plan, find or write and test blocks, wire."""
    from flowforge.apps.thinker.builder import build_pipeline
    from flowforge.apps.thinker.llm import default_build_model
    from flowforge.cli.plumbing import parse_inputs
    from flowforge.service.pipeline import run_pipeline

    inputs = parse_inputs(input, None)
    chosen = model or default_build_model()
    if chosen.startswith("local/") and not quiet:
        err.print(f"[yellow]note:[/] {escape(local_model_note(chosen))}", highlight=False,
                  markup=True)
    if not yes and not has_terminal():
        fail("no terminal to answer clarifying questions on: pass --yes to build from the "
             "sentence as it is", 2)
    try:
        refined = intent if yes else _clarify_interactively(intent, model)

        status = err.status("") if err.is_terminal and not quiet else None

        def show(event: dict[str, Any]) -> None:
            if event["type"] == "llm_progress":
                if status is not None:     # one line, rewritten: the model is writing
                    status.update(f"{event['stage']}: the model is writing, "
                                  f"{event['tokens']} tokens so far")
                    status.start()
                return
            if status is not None:
                status.stop()
            line = describe_event(event)
            if line and not quiet:
                err.print(line, highlight=False, markup=True)

        try:
            result = asyncio.run(build_pipeline(refined, model=model, on_event=show))
        finally:
            if status is not None:
                status.stop()
    except FlowforgeError as exc:
        fail(str(exc), 1)
    answer: dict[str, Any] = {"build": result.to_dict(), "run": None}
    if result.ok and output is not None:
        output.write_text(json.dumps(result.pipeline, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")
        err.print(f"pipeline written to {output}")
    code = 0 if result.ok else 1
    if result.ok and run:
        try:
            ran = asyncio.run(run_pipeline(result.pipeline, inputs, user=user, model=model))
        except FlowforgeError as exc:
            fail(str(exc), 2)
        answer["run"] = ran.to_dict()
        code = 0 if ran.status == "succeeded" else 1
        if not as_json:
            out.print(json.dumps(ran.outputs, indent=2, ensure_ascii=False, default=str),
                      highlight=False)
    if as_json:
        print(json.dumps(answer, ensure_ascii=False, default=str))
    elif result.ok and output is None:
        print(json.dumps(result.pipeline, indent=2, ensure_ascii=False))
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("build")(build_command)
