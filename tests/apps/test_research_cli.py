"""`flowforge research` as a user types it: the phases, passes and scores as
they happen, the answer with its sources, --json, and Ctrl-C cancelling the
run cleanly (exit 1, run stored `cancelled`, the finished phase kept)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flowforge.storage import storage_from_url
from tests import in_process

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "scripted" / "research.rules.yaml"
URL = "https://trail-guide.example.net/pitching-a-tent-in-wind"


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**os.environ, "FLOWFORGE_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}",
            "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{tmp_path / 'kb.db'}", "COLUMNS": "200"}


def command(*args: str) -> list[str]:
    """The command line of a real `flowforge research` process (Ctrl-C is a signal)."""
    return [sys.executable, "-m", "flowforge.cli.main", "research", *args]


def research(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`flowforge research ARGS`, run in this process (tests/in_process.py)."""
    return in_process.flowforge("research", *args, env=env, cwd=ROOT)


def test_the_live_lines_the_answer_and_the_scores(env):
    done = research("tent wind?", "--web", "examples/web", "--model", f"scripted/{RULES}",
                    env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[:4] == [
        "[  0%] question: started",
        "[  0%] question: pass 1 question_improvement_confidence 0.60",
        "[  0%] question: pass 2 question_improvement_confidence 0.90",
        "[ 33%] question: done after 2 pass(es), threshold: How should I pitch and anchor "
        "a tent in strong wind?"]
    assert "[ 66%] knowledge base: done after 1 pass(es), threshold: 3 entries, 0 gap(s)" \
        in lines
    assert lines[-1] == "[100%] answer: done after 2 pass(es), threshold"
    assert "deadman anchors" in done.stdout and URL in done.stdout
    assert "answer_confidence 0.92" in done.stdout


def test_brief_answers_from_the_passages_and_lists_only_gathered_sources(env):
    done = research("Which end of a tent should face the wind?", "--brief", "--web",
                    "examples/web", "--model", f"scripted/{RULES}", env=env)
    assert done.returncode == 0, done.stderr
    assert "[ 33%] question: done after 0 pass(es), brief: Which end of a tent should face " \
        "the wind?" in done.stderr.splitlines()
    assert "answering from the passages" not in done.stderr      # lines, not the live table
    answer, sources = done.stdout.split("sources:")
    assert "narrow, lowest end facing into the wind" in answer
    assert sources.split()[0] == URL                      # the page the search returned


def test_json_threshold_and_cap(env):
    done = research("tent wind?", "--web", "examples/web", "--model", f"scripted/{RULES}",
                    "--threshold", "0.95", "--max-iterations", "2", "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded"
    assert result["iterations"] == {"question": 2, "knowledge": 2, "answer": 2}
    assert {p["stopped_by"] for p in result["phases"].values()} == {"max_iterations"}
    assert [i["question_improvement_confidence"]
            for i in result["phases"]["question"]["iterations"]] == [0.6, 0.9]


def test_bad_command_lines_exit_2(env):
    empty = research("  ", env=env)
    assert empty.returncode == 2 and "the question is empty" in empty.stderr
    high = research("q?", "--threshold", "2", env=env)
    assert high.returncode == 2


def test_nothing_to_search_is_said_before_any_model_call(env):
    """Offline with no --kb and no --web, the web search would read a base nobody
    made: the command says how to give it documents instead of researching nothing."""
    done = research("What is the warranty on a Summit tent?", "--model",
                    f"scripted/{RULES}", env=env)
    assert done.returncode == 2
    assert "nothing to search" in done.stderr and "--kb path/to/documents" in done.stderr
    assert "question: started" not in done.stderr                 # no phase ran
    given = research("What is the warranty on a Summit tent?", "--brief", "--kb",
                     "examples/policies", "--model", f"scripted/{RULES}", env=env)
    assert "nothing to search" not in given.stderr


def test_ctrl_c_cancels_the_run_cleanly_and_keeps_the_finished_phase(env, tmp_path):
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for rule in rules["rules"]:
        if rule.get("system", "").startswith("^You extract"):
            rule["latency_ms"] = 60000           # the knowledge phase "works" a minute
    slow = tmp_path / "slow.rules.yaml"
    slow.write_text(yaml.safe_dump(rules), encoding="utf-8")
    process = subprocess.Popen(command("tent wind?", "--web", "examples/web", "--model",
                                       f"scripted/{slow}"), cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        for line in process.stderr:
            seen.append(line)
            if "knowledge base: pass" in line or "knowledge base: started" in line:
                break
        assert any("knowledge base: started" in line for line in seen), "".join(seen)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 1, stderr
    assert "cancelled: question phase(s) finished and kept" in stderr
    assert "Traceback" not in stderr
    session = stdout.strip().split("session ")[-1]

    async def stored():
        storage = storage_from_url(env["FLOWFORGE_DATABASE_URL"])
        await storage.open()
        try:
            return await storage.get_run(session), await storage.get_blocks(session)
        finally:
            await storage.close()

    run, blocks = asyncio.run(stored())
    assert run["status"] == "cancelled"
    top = {b["block_id"]: b["status"] for b in blocks if not b["scope"]}
    assert top["question"] == "succeeded" and top["question_done"] == "succeeded"
    assert top["knowledge"] == "cancelled"
