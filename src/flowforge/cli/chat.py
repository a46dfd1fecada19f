"""`flowforge chat`: the RAG chat in the terminal, and its sessions.

    flowforge chat --kb examples/policies --web examples/web        # interactive
    flowforge chat --once "How long is the warranty?" --kb policies --json
    flowforge chat sessions                  # list; `show ID`, `delete ID`

Each question is one run of the shipped chat workflow (or `--workflow`,
an edited copy) through `flowforge.service.chat.ask`, so the terminal, the
HTTP API and Python answer alike.  `--kb` and `--web` take a knowledge base
name or a folder (kept in sync with a base named after it); `--web` also
takes `perplexity` or `tavily`.  `--db` is the one store of the command:
sessions, runs, knowledge bases and keywords (as `flowforge kb --db` keeps
them).  Exit codes: 0 answered, 1 the chat could
not answer (the reason is printed), 2 bad command line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from flowforge.cli.exits import error, exit_code, fail as _fail
from flowforge.cli.options import db_option
from flowforge.errors import FlowforgeError

__all__ = ["chat_app", "register", "render_answer"]

out = Console(markup=False)
err = Console(stderr=True, soft_wrap=True, markup=False)
chat_app = typer.Typer(help="Chat with a knowledge base (and the web when it is not enough).",
                       invoke_without_command=True)

_BACKENDS = ("offline", "perplexity", "tavily")
_HELP = "/new starts a new session, /sources shows the last answer's sources, /quit leaves."


def _web(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    if value in _BACKENDS:
        return {"web_backend": value}
    return {"web_backend": "offline", "web_source": value}


def render_answer(answer: Any, console: Console) -> None:
    """The answer, then its sources marked KB or WEB, then the confidence."""
    console.print(answer.answer, highlight=False, markup=False)
    if answer.sources:
        console.print("[dim]sources:[/]", markup=True)
        for source in answer.sources:
            kind = "WEB" if source.get("kind") == "web" else "KB"
            where = f" <{source['url']}>" if source.get("url") else ""
            console.print(f"  [{'cyan' if kind == 'WEB' else 'green'}]{kind}[/] "
                          f"{escape(str(source.get('title', '')) + where)}", highlight=False,
                          markup=True)
    confidence = answer.confidence_score
    console.print(f"[dim]confidence {confidence if confidence is not None else 'n/a'}, "
                  f"session {answer.session_id}, run {answer.run_id}[/]", highlight=False,
                  markup=True)


class _Spinner:
    """Says which tool runs while the model works (only on a terminal)."""

    def __init__(self, console: Console) -> None:
        self.status = console.status("thinking...") if console.is_terminal else None

    def __enter__(self) -> "_Spinner":
        if self.status:
            self.status.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.status:
            self.status.stop()

    def on_event(self, event: dict[str, Any]) -> None:
        if self.status is None:
            return
        if event["type"] == "tool_called":
            self.status.update(f"{event.get('name')} done, thinking...")
        elif event["type"] == "llm_request":
            self.status.update("the model is thinking...")


def _ask(question: str, options: dict[str, Any], console: Console) -> Any:
    from flowforge.service.chat import ask

    with _Spinner(console) as spinner:
        return asyncio.run(ask(question, on_event=spinner.on_event, **options))


@chat_app.callback()
def chat_command(
    ctx: typer.Context,
    kb: Optional[str] = typer.Option(None, "--kb", help="Knowledge base searched first: a name, "
                                     "or a folder kept in sync with a base named after it "
                                     "(default: default_kb)."),
    web: Optional[str] = typer.Option(None, "--web", help="Where web_search looks: offline (the "
                                      "'web' knowledge base), a folder or base standing in for "
                                      "the web, perplexity or tavily."),
    model: Optional[str] = typer.Option(None, "--model", "-m",
                                        help="Model, e.g. openai/gpt-4o (default: "
                                             "local/qwen2.5-0.5b when installed, else "
                                             "local/smollm2)."),
    session: Optional[str] = typer.Option(None, "--session", "-s",
                                          help="Continue this session (default: a new one)."),
    once: Optional[str] = typer.Option(None, "--once", help="Ask one question, print the "
                                       "answer and exit (for scripts)."),
    as_json: bool = typer.Option(False, "--json", help="With --once: print the answer as JSON."),
    workflow: Optional[Path] = typer.Option(None, "--workflow", help="An edited copy of the "
                                            "chat workflow to run instead of the shipped one."),
    user: str = typer.Option("default", "--user", "-u", help="User id (sessions are per user)."),
    db: Optional[str] = db_option("Database URL for everything the chat keeps: sessions, runs, "
                                  "knowledge bases and keywords (default: "
                                  "FLOWFORGE_DATABASE_URL and FLOWFORGE_KNOWLEDGE_URL)."),
) -> None:
    """Chat with a knowledge base; the web is searched when it is not enough."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"user": user, "db": db}
        return
    if as_json and once is None:
        _fail("--json needs --once QUESTION (the interactive chat prints text)")
    if model is not None:
        from flowforge.service.loading import model_problem
        problem = model_problem(model, "--model")
        if problem is not None:
            _fail(str(problem))
    if workflow is not None and not workflow.is_file():
        _fail(f"--workflow: no such file: {workflow} (copy the shipped one with "
              f"`flowforge chat show-workflow > my_chat.yaml`)")
    options: dict[str, Any] = {"kb": kb, "model": model, "session_id": session, "user": user,
                               "storage": db, "workflow": workflow, **_web(web)}
    if db:
        # one store per command: the knowledge bases (and the keyword index) live
        # in --db too, as `flowforge kb --db` keeps them
        options["services"] = {"knowledge": db}
    if once is not None:
        try:
            answer = _ask(once, options, err)
        except FlowforgeError as exc:
            if as_json:
                print(json.dumps({"error": str(exc), "run_id": getattr(exc, "run_id", None)}))
            _fail(str(exc), exit_code(exc) if not hasattr(exc, "run_id") else 1)
        if as_json:
            print(json.dumps(answer.to_dict(), ensure_ascii=False, default=str))
        else:
            render_answer(answer, out)
        return
    _interactive(options)


def _interactive(options: dict[str, Any]) -> None:
    tty = sys.stdin.isatty()
    if tty:
        out.print(f"[bold]flowforge chat[/] - {_HELP}", markup=True)
    last = None
    while True:
        try:
            line = input("you> " if tty else "")
        except (EOFError, KeyboardInterrupt):
            break
        question = line.strip()
        if not question:
            continue
        if question in ("/quit", "/exit"):
            break
        if question == "/new":
            options["session_id"], last = None, None
            out.print("[dim]new session[/]", markup=True)
            continue
        if question == "/sources":
            if last is None:
                out.print("[dim]no answer yet[/]", markup=True)
            else:
                for source in last.sources:
                    out.print(json.dumps(source, ensure_ascii=False), highlight=False)
            continue
        if question.startswith("/"):
            out.print(f"[dim]unknown command {escape(question)}: {_HELP}[/]", markup=True)
            continue
        try:
            last = _ask(question, options, out)
        except FlowforgeError as exc:
            error(str(exc))
            if getattr(exc, "session_id", None):
                options["session_id"] = exc.session_id
            continue
        options["session_id"] = last.session_id
        render_answer(last, out)


def _storage_call(ctx: typer.Context, name: str, *args: Any) -> Any:
    from flowforge.service import chat as chat_app_module

    settings = ctx.obj or {}
    try:
        return asyncio.run(getattr(chat_app_module, name)(*args, user=settings.get("user"),
                                                          storage=settings.get("db")))
    except FlowforgeError as exc:
        _fail(str(exc), exit_code(exc))


@chat_app.command("sessions")
def sessions_command(ctx: typer.Context) -> None:
    """List your chat sessions, newest first."""
    found = _storage_call(ctx, "list_sessions")
    if not found:
        out.print("no chat sessions yet (`flowforge chat` starts one)")
        return
    for item in found:
        out.print(f"{item['session_id']}  {item['message_count']:>3} messages  {item['title']}",
                  highlight=False, markup=False)


@chat_app.command("show")
def show_command(ctx: typer.Context,
                 session_id: str = typer.Argument(..., help="Session id.")) -> None:
    """Print one session's messages."""
    found = _storage_call(ctx, "get_session", session_id)
    if found is None:
        _fail(f"no chat session '{session_id}' (`flowforge chat sessions` lists yours)", 1)
    for message in found["messages"]:
        out.print(f"[bold]{message['role']}>[/] ", end="", markup=True)
        out.print(message.get("content") or "", highlight=False, markup=False)


@chat_app.command("delete")
def delete_command(ctx: typer.Context,
                   session_id: str = typer.Argument(..., help="Session id.")) -> None:
    """Delete one session and its messages."""
    if not _storage_call(ctx, "delete_session", session_id):
        _fail(f"no chat session '{session_id}' (`flowforge chat sessions` lists yours)", 1)
    out.print(f"deleted chat session {session_id}")


@chat_app.command("show-workflow")
def show_workflow_command() -> None:
    """Print the shipped chat workflow, to copy and edit (run it with --workflow)."""
    from flowforge.apps.chat import CHAT_WORKFLOW

    sys.stdout.write(CHAT_WORKFLOW.read_text(encoding="utf-8"))


def register(app: typer.Typer) -> None:
    app.add_typer(chat_app, name="chat")
