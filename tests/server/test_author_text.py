"""The author's text survives (issue 27): a saved workflow keeps the text as
written, byte for byte, and an edit from the canvas or a form (`PATCH`)
changes only the lines it touches; a block's place on the canvas is kept in
the document's `metadata.layout`.  On SQLite and on PostgreSQL."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
YAML = {"Content-Type": "application/yaml"}
SUPPORT = (EXAMPLES / "support.yaml").read_text()


def _changed(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) between two texts."""
    removed, added = [], []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith("-") and not line.startswith("---"):
            removed.append(line[1:])
        elif line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
    return removed, added


async def test_an_upload_reads_back_exactly_as_written(any_server):
    async with any_server.client("admin") as admin:
        saved = await admin.post("/api/workflows", content=SUPPORT, headers=YAML)
        assert saved.status_code == 201, saved.text
        assert saved.json()["source"] == SUPPORT
        row = (await admin.get("/api/workflows/support")).json()
        assert row["source"] == SUPPORT                   # the 17-line header, key order
        assert row["source"].startswith("# The main demo")
        assert "concurrency" not in row["source"]        # no default filled in...
        assert row["document"]["concurrency"] == 32      # ...though the engine's copy has it

        as_json = json.dumps({"id": "tiny", "blocks": [
            {"id": "calc", "type": "set", "with": {"b": 1, "a": 2}}]}, indent=3)
        put = await admin.put("/api/workflows/tiny", content=as_json)
        assert put.status_code == 201, put.text
        assert (await admin.get("/api/workflows/tiny")).json()["source"] == as_json
        # every version keeps its own text
        await admin.put("/api/workflows/support", content=SUPPORT + "# v2\n", headers=YAML)
        first = (await admin.get("/api/workflows/support?version=1")).json()
        assert first["source"] == SUPPORT
        assert (await admin.get("/api/workflows/support")).json()["source"].endswith("# v2\n")


async def test_an_edit_changes_only_the_lines_it_touches(any_server):
    async with any_server.client("admin") as admin:
        await admin.post("/api/workflows", content=SUPPORT, headers=YAML)
        edits = [{"op": "set", "block": "answer", "path": "with.temperature", "value": 0.7},
                 {"op": "add_after", "block": "review", "after": "grade"},
                 {"op": "move", "block": "search", "x": 120, "y": 48.5},
                 {"op": "add_block", "spec": {"id": "note", "type": "set",
                                              "with": {"seen": "{{input.query}}"}}}]
        edited = await admin.patch("/api/workflows/support",
                                   json={"edits": edits, "base_version": 1})
        assert edited.status_code == 200, edited.text
        assert edited.json()["version"] == 2
        text = (await admin.get("/api/workflows/support")).json()["source"]
        removed, added = _changed(SUPPORT, text)
        assert removed == ["      temperature: 0", "    after: [triage]"]
        assert added[:2] == ["      temperature: 0.7", "    after: [triage, grade]"]
        assert added[2:] == ["  - id: note", "    type: set", "    with:",
                             "      seen: '{{input.query}}'", "metadata:", "  layout:",
                             "    search: {x: 120, y: 48.5}"]
        # every comment line of the author's is still there, in order
        comments = [line for line in SUPPORT.splitlines() if line.lstrip().startswith("#")]
        assert [line for line in text.splitlines() if line.lstrip().startswith("#")] == comments
        row = (await admin.get("/api/workflows/support")).json()
        assert row["document"]["metadata"] == {"layout": {"search": {"x": 120, "y": 48.5}}}
        graph = (await admin.get("/api/workflows/support/graph")).json()
        assert "note" in {node["id"] for node in graph["nodes"]}

        # a later edit sees the position and removes a block together with it
        again = await admin.patch("/api/workflows/support", json={"edits": [
            {"op": "remove_block", "block": "note"},
            {"op": "remove_after", "block": "review", "after": "grade"},
            {"op": "unset", "block": "answer", "path": "with.temperature"}]})
        assert again.status_code == 200, again.text
        latest = (await admin.get("/api/workflows/support")).json()["source"]
        removed, added = _changed(SUPPORT, latest)
        assert removed == ["      temperature: 0"]
        assert added == ["metadata:", "  layout:", "    search: {x: 120, y: 48.5}"]


async def test_an_edit_that_breaks_the_workflow_is_refused_whole(any_server):
    async with any_server.client("admin") as admin:
        await admin.post("/api/workflows", content=SUPPORT, headers=YAML)
        # `answer` reads `search`: removing `search` leaves a dangling reference
        broken = await admin.patch("/api/workflows/support", json={"edits": [
            {"op": "move", "block": "answer", "x": 1, "y": 2},
            {"op": "remove_block", "block": "search"}]})
        assert broken.status_code == 422, broken.text
        body = broken.json()
        assert body["error"]["code"] == "invalid_workflow"
        problem = next(p for p in body["error"]["details"] if "search" in p["message"])
        # `answer` is the fifth block once `search` is gone
        assert problem["where"].startswith("blocks[4].with") and problem["line"] > 17

        unknown = await admin.patch("/api/workflows/support", json={"edits": [
            {"op": "set", "block": "nope", "path": "name", "value": "x"}]})
        assert unknown.status_code == 422
        assert "edits[0].block" in unknown.text and "no block 'nope'" in unknown.text

        stale = await admin.patch("/api/workflows/support", json={
            "edits": [{"op": "move", "block": "answer", "x": 1, "y": 2}], "base_version": 7})
        assert stale.status_code == 409 and "version 1" in stale.text
        row = (await admin.get("/api/workflows/support")).json()
        assert (row["version"], row["source"]) == (1, SUPPORT)     # nothing stored
        missing = await admin.patch("/api/workflows/absent", json={"edits": [
            {"op": "move", "block": "a", "x": 1, "y": 2}]})
        assert missing.status_code == 404
