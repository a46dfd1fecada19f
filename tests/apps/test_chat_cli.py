"""`flowforge chat` as a user types it: --once (text and JSON), the interactive
loop on a pipe, sessions, and clear errors with the documented exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import in_process

ROOT = Path(__file__).resolve().parents[2]
RULES = "scripted/examples/scripted/chat.rules.yaml"
WEB_QUESTION = "What does EU law say about withdrawing from an online order?"


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}",
            "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{tmp_path / 'kb.db'}"}


def chat(env, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`flowforge chat ARGS`, run in this process (tests/in_process.py)."""
    return in_process.flowforge("chat", *args, env=env, cwd=ROOT, input=stdin)


def test_once_json_goes_to_the_web_and_cites_both(env):
    done = chat(env, "--once", WEB_QUESTION, "--kb", "examples/policies", "--web",
                "examples/web", "--model", RULES, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["used_internal_kb"] and answer["used_external_kb"]
    assert [(s["kind"], s.get("url")) for s in answer["sources"]] == [
        ("kb", None), ("web", "https://consumer-rights.example.eu/right-of-withdrawal")]
    assert answer["tool_calls"] == ["knowledge_base_search", "web_search", "index_keywords",
                                    "generate_response"]

    listed = chat(env, "sessions")
    assert answer["session_id"] in listed.stdout and "2 messages" in listed.stdout
    shown = chat(env, "show", answer["session_id"])
    assert "user> " + WEB_QUESTION in shown.stdout.replace("\n", " ")
    assert chat(env, "delete", answer["session_id"]).returncode == 0
    missing = chat(env, "show", answer["session_id"])
    assert missing.returncode == 1 and "no chat session" in missing.stderr


def test_once_text_marks_sources_and_the_interactive_loop_reads_a_pipe(env):
    done = chat(env, "--once", "How long is the warranty?", "--kb", "examples/policies",
                "--model", RULES)
    assert done.returncode == 0, done.stderr
    assert "two-year warranty" in done.stdout and "KB Warranty" in done.stdout
    assert "confidence 0.9" in done.stdout

    loop = chat(env, "--kb", "examples/policies", "--model", RULES,
                stdin="How long is the warranty?\n/sources\n/bogus\n/new\n/quit\n")
    assert loop.returncode == 0, loop.stderr
    assert "two-year warranty" in loop.stdout
    assert '"kind": "kb"' in loop.stdout                 # /sources prints them whole
    assert "unknown command /bogus" in loop.stdout and "new session" in loop.stdout


def test_a_model_that_will_not_search_is_a_one_line_error_exit_1(env, tmp_path):
    rules = tmp_path / "stubborn.rules.yaml"
    rules.write_text(yaml.safe_dump({"default": "I just know it is two years."}))
    done = chat(env, "--once", "Warranty?", "--kb", "examples/policies", "--model",
                f"scripted/{rules}")
    assert done.returncode == 1
    assert "without calling the required tool 'knowledge_base_search'" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_command_lines_exit_2_with_the_fix(env):
    no_once = chat(env, "--json")
    assert no_once.returncode == 2 and "--json needs --once" in no_once.stderr
    bad_model = chat(env, "--once", "hi", "--model", "lokal/smollm2")
    assert bad_model.returncode == 2 and "local" in bad_model.stderr
    no_file = chat(env, "--once", "hi", "--workflow", "nope.yaml")
    assert no_file.returncode == 2 and "show-workflow" in no_file.stderr
    bad_session = chat(env, "--once", "hi", "--session", "../x", "--model", RULES)
    assert bad_session.returncode == 2 and "invalid session id" in bad_session.stderr


def test_the_shipped_workflow_prints_and_an_edited_copy_runs(env, tmp_path):
    shown = chat(env, "show-workflow")
    assert shown.returncode == 0
    copy = tmp_path / "my_chat.yaml"
    copy.write_text(shown.stdout.replace("id: rag-chat", "id: my-chat"))
    done = chat(env, "--once", "How long is the warranty?", "--kb", "examples/policies",
                "--model", RULES, "--workflow", str(copy), "--json")
    assert done.returncode == 0, done.stderr
    runs = in_process.flowforge("runs", "list", env=env, cwd=ROOT)
    assert "my-chat" in runs.stdout


def test_db_holds_everything_the_chat_keeps(env, tmp_path):
    """`--db` is the command's one store: sessions, runs, the knowledge bases
    synced from folders and the keywords a web search indexed all go there;
    the default stores (FLOWFORGE_DATABASE_URL, FLOWFORGE_KNOWLEDGE_URL) are
    never opened."""
    import sqlite3

    one = tmp_path / "one.db"
    done = chat(env, "--once", WEB_QUESTION, "--kb", "examples/policies", "--web",
                "examples/web", "--model", RULES, "--json", "--db", f"sqlite:///{one}")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    with sqlite3.connect(one) as db:
        assert {row[0] for row in db.execute("SELECT name FROM kb_bases")} == \
            {"policies", "web-web"}
        assert db.execute("SELECT count(*) FROM kb_keywords").fetchone()[0] >= 3
        assert db.execute("SELECT count(*) FROM chat_sessions").fetchone()[0] == 1
    assert not (tmp_path / "kb.db").exists() and not (tmp_path / "runs.db").exists()
    # and the kb command, given the same --db, sees the same bases
    listed = in_process.flowforge("kb", "list", "--db", f"sqlite:///{one}", env=env, cwd=ROOT)
    assert "policies" in listed.stdout and "web-web" in listed.stdout
    again = chat(env, "--db", f"sqlite:///{one}", "show", answer["session_id"])
    assert again.returncode == 0 and WEB_QUESTION in again.stdout.replace("\n", " ")
