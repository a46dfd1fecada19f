"""On a server, a relative path in a document resolves against one documented
root, `--files-root`, for every kind of path, and never against the server's
working directory: without a root such a path is refused, naming the option
(issue 25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.conftest import start_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULES = "rules:\n  - reply: answered from the rules file\n"


def _agent(model: str) -> dict:
    return {"id": "ask", "blocks": [{"id": "answer", "type": "agent",
                                     "with": {"model": model, "prompt": "hello"}}]}


@pytest.fixture
async def rooted(tmp_path):
    """A server whose files root is a folder holding the examples and a rules file."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "r.yaml").write_text(RULES)
    (tmp_path / "nested").symlink_to(EXAMPLES / "nested")
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}",
                                    files_root=str(tmp_path))
    yield live
    await stop()


async def test_nested_workflows_and_scripted_rules_resolve_under_the_files_root(rooted,
                                                                               monkeypatch,
                                                                               tmp_path):
    monkeypatch.chdir(tmp_path.parent)         # the working directory plays no part
    nested = (EXAMPLES / "nested.yaml").read_text()
    async with rooted.client("admin") as admin:
        saved = await admin.post("/api/workflows", content=nested,
                                 headers={"Content-Type": "application/yaml"})
        ran = await admin.post("/api/workflows/nested/runs?wait=true",
                               json={"inputs": {"customer": "Ada", "vip": True}})
        await admin.post("/api/workflows", json=_agent("scripted/rules/r.yaml"))
        asked = await admin.post("/api/workflows/ask/runs?wait=true", json={})
    assert saved.status_code == 201 and "warnings" not in saved.json(), saved.text
    assert ran.json()["status"] == "succeeded", ran.json()["blocks"]
    assert ran.json()["outputs"]["reply"]["message"] == "Good day, Ada. Welcome back."
    assert asked.json()["status"] == "succeeded", asked.json()["blocks"]
    assert asked.json()["results"]["answer"]["content"] == "answered from the rules file"


async def test_without_a_files_root_relative_paths_are_refused_naming_it(tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(EXAMPLES)       # nested/greeting.yaml exists here: still not used
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}", files_root=None)
    try:
        async with live.client("admin") as admin:
            saved = await admin.post("/api/workflows",
                                     content=(EXAMPLES / "nested.yaml").read_text(),
                                     headers={"Content-Type": "application/yaml"})
            ran = await admin.post("/api/workflows/nested/runs?wait=true",
                                   json={"inputs": {"customer": "Ada"}})
            await admin.post("/api/workflows", json=_agent("scripted/rules/r.yaml"))
            asked = await admin.post("/api/workflows/ask/runs?wait=true", json={})
    finally:
        await stop()
    assert saved.status_code == 201
    assert "--files-root" in saved.json()["warnings"][0]
    assert "blocks[0].with.workflow" in saved.json()["warnings"][0]
    for answer, block in ((ran, "greet"), (asked, "answer")):
        result = answer.json()
        assert result["status"] == "failed"
        # the nested file fails its block; the model's rules file is refused before
        # any block runs (models are checked at the run's start)
        error = result["blocks"][block]["error"] if block in result["blocks"] else \
            result["events"][-1]["error"]
        assert "is a relative path" in error and "--files-root" in error, error
        assert str(EXAMPLES) not in error
