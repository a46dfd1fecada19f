"""`after:` joins as written, and the warnings `validate` gives for documents
whose meaning changed when every dependency became required (issue 25)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import flowforge
from flowforge.workflow.joins import join_warnings
from tests import in_process

ROOT = Path(__file__).resolve().parents[2]


def s(id, after=None, **with_):
    block = {"id": id, "type": "set", "with": with_ or {"v": 1}}
    if after is not None:
        block["after"] = after
    return block


GATE = {"id": "gate", "type": "condition",
        "with": {"cases": [{"when": "input.big", "goto": "big"}], "default": "small"}}
BASE = s("base", fee=3)


def warnings_of(blocks):
    return [str(p) for p in join_warnings(flowforge.load({"id": "t", "blocks": blocks}).graph)]


def test_a_block_on_a_dead_branch_that_reads_an_always_run_block_is_pointed_out():
    [warning] = warnings_of([BASE, GATE, s("big"), s("small"),
                             s("charge_small", after=["small"], fee="{{base.fee}}")])
    assert warning.startswith("blocks[4]: 'charge_small' needs 'small'")
    assert "also 'base'" in warning and "skipped with 'small'" in warning
    assert "`after: {any: [small, base]}`" in warning and "`after: {all: [small]}`" in warning


@pytest.mark.parametrize("after", [{"all": ["small"]}, {"any": ["small", "base"]}])
def test_an_explicit_after_silences_the_warning(after):
    assert warnings_of([BASE, GATE, s("big"), s("small"),
                        s("charge_small", after=after, fee="{{base.fee}}")]) == []


@pytest.mark.parametrize("name, blocks", [
    ("a route's own target reading another block (the old rule required choosing too)",
     [BASE, GATE, s("big", fee="{{base.fee}}"), s("small")]),
    ("a chain down one branch",
     [GATE, s("big"), s("small"), s("next", v="{{big.v}}"), s("last", a="{{big.v}}", b="{{next.v}}")]),
    ("a join of the alternatives, reading both",
     [GATE, s("big"), s("small"), s("reply", after=["big", "small"], m="{{big.v}}{{small.v}}")]),
    ("an on_error handler reading only the failed block",
     [{"id": "x", "type": "set", "with": {"v": 1}, "on_error": "h"}, s("h", why="{{x.error}}")]),
    ("blocks that always run",
     [BASE, s("a", v="{{base.fee}}"), s("b", a="{{a.v}}", f="{{base.fee}}")]),
])
def test_documents_whose_meaning_is_unchanged_get_no_warning(name, blocks):
    assert warnings_of(blocks) == [], name


def test_an_on_error_handler_that_also_reads_another_block_is_pointed_out():
    [warning] = warnings_of([BASE, {"id": "x", "type": "set", "with": {"v": 1},
                                    "on_error": "h"},
                             s("h", why="{{x.error}}", fee="{{base.fee}}")])
    assert "on_error handler of 'x'" in warning and "runs only when 'x' fails" in warning


def test_a_plain_list_join_beside_an_always_run_block_is_pointed_out():
    [warning] = warnings_of([BASE, GATE, s("big"), s("small"),
                             s("reply", after=["big", "small"], fee="{{base.fee}}")])
    assert "waits for one of big, small" in warning and "needs 'base'" in warning


def test_every_shipped_workflow_validates_without_a_warning():
    shipped = [*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/nested/*.yaml"),
               *ROOT.glob("src/flowforge/apps/*/*.yaml")]
    assert len(shipped) >= 8
    for path in shipped:
        assert join_warnings(flowforge.load(path).graph) == [], path


def test_validate_prints_the_warning_and_still_succeeds(tmp_path):
    path = tmp_path / "charge.yaml"
    path.write_text(yaml.safe_dump({"id": "charge", "inputs": {"big": {"type": "boolean"}},
                                    "blocks": [BASE, GATE, s("big"), s("small"),
                                               s("charge_small", after=["small"],
                                                 fee="{{base.fee}}")]}))
    done = in_process.flowforge("validate", str(path))
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout
    assert "warning:" in done.stderr and "blocks[4]: 'charge_small' needs 'small'" in \
        done.stderr and "`after: {any: [small, base]}`" in done.stderr


@pytest.mark.parametrize("after, message", [
    ({"any": ["a"]}, "`any` needs two or more alternatives"),
    ({}, "write `after: {any: [a, b]}`"),
    ({"any": ["a", "b"], "all": ["a"]}, "'a' is listed under both `all` and `any`"),
    ({"any": ["a", "nope"]}, "unknown block 'nope' in after"),
    ({"one": ["a"]}, "one"),
])
def test_a_malformed_join_is_a_located_problem(after, message):
    with pytest.raises(flowforge.ValidationFailed) as caught:
        flowforge.load({"id": "t", "blocks": [s("a"), s("b"), s("c", after=after)]})
    assert "blocks[2].after" in str(caught.value) and message in str(caught.value)
