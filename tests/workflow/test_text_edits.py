"""Edits to a workflow's text keep every line they do not touch (issue 27):
on every shipped example, whatever its indent style or hand-folded flow
mappings, and on JSON documents."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from flowforge.errors import WorkflowError
from flowforge.workflow.loader import parse_text
from flowforge.workflow.text_edits import Edit, apply_edits

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKFLOWS = sorted(p for p in EXAMPLES.glob("*.yaml")
                   if isinstance(parse_text(p.read_text(), p.name), dict)
                   and parse_text(p.read_text(), p.name).get("blocks"))
edits = TypeAdapter(list[Edit]).validate_python


def _removed_and_added(before: str, after: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    return ([d[1:] for d in diff if d.startswith("-") and not d.startswith("---")],
            [d[1:] for d in diff if d.startswith("+") and not d.startswith("+++")])


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_placing_a_block_adds_its_position_and_changes_nothing_else(path):
    text = path.read_text()
    first = parse_text(text, path.name)["blocks"][0]["id"]
    moved = apply_edits(text, edits([{"op": "move", "block": first, "x": 10, "y": 20}]))
    removed, added = _removed_and_added(text, moved)
    assert removed == []
    assert added[-1].strip() == f"{first}: {{x: 10, y: 20}}"
    assert parse_text(moved, path.name)["metadata"]["layout"] == {first: {"x": 10, "y": 20}}
    assert apply_edits(text, []) == text


def test_a_json_document_stays_json_and_keeps_its_untouched_lines():
    document = {"id": "calc", "name": "Calc", "blocks": [
        {"id": "a", "type": "set", "with": {"v": 1}},
        {"type": "set", "id": "b", "with": {"w": "{{a.v}}"}}]}
    text = json.dumps(document, indent=2) + "\n"
    edited = apply_edits(text, edits([{"op": "set", "block": "b", "path": "with.w",
                                       "value": "{{a.v}}!"}]))
    assert json.loads(edited)["blocks"][1] == {"type": "set", "id": "b",
                                                "with": {"w": "{{a.v}}!"}}
    assert _removed_and_added(text, edited) == (['        "w": "{{a.v}}"'],
                                                ['        "w": "{{a.v}}!"'])


def test_a_bad_edit_names_itself_and_the_fix():
    text = "id: x\nblocks:\n  - {id: a, type: set, with: {v: 1}}\n"
    with pytest.raises(WorkflowError) as caught:
        apply_edits(text, edits([{"op": "move", "block": "a", "x": 1, "y": 1},
                                 {"op": "add_after", "block": "a", "after": "ghost"}]))
    assert caught.value.where == "edits[1].after" and "no block 'ghost'" in str(caught.value)
    with pytest.raises(WorkflowError, match="already exists"):
        apply_edits(text, edits([{"op": "add_block", "spec": {"id": "a", "type": "set"}}]))
