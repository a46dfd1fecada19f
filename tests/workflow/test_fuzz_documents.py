"""The document fuzzer (issue 16): whatever a user sends as a workflow,
`flowforge.load` answers with a located WorkflowError or a compiled workflow,
never another exception, and within a second.  Documents come from mutations
of the shipped examples and from a generator of plausible shapes; the runs are
seeded, so a failure is the same on every machine.  `bench/fuzz_documents.py`
runs the same generators for longer."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.timing import fastest
from tests.workflow.fuzzing import documents, example_mutations, load_any

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), database=None)


def _timed(work: Callable[[], Any], limit: float = 1.0) -> Any:
    """`work()`'s result, failing if it takes `limit` seconds or more twice in a
    row (tests/timing.py: a blow-up is slow every time, one slow try is noise)."""
    result, took = fastest(work, limit, tries=2)
    assert took < limit, f"took {took:.2f} s at best of two tries (limit {limit} s)"
    return result


def _check(document: Any) -> None:
    outcome = _timed(lambda: load_any(document))
    assert outcome in ("ok", "invalid"), outcome


@SETTINGS
@seed(16)
@given(example_mutations())
def test_mutated_examples_load_or_are_refused_cleanly(document):
    _check(document)


@SETTINGS
@seed(17)
@given(documents())
def test_generated_documents_load_or_are_refused_cleanly(document):
    _check(document)


@pytest.mark.parametrize("text", [
    "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n",
    "id: x\nblocks: " + "[" * 5000 + "]" * 5000,
    '{"id": "x", "blocks": ' + "[" * 5000 + "]" * 5000 + "}",
    "id: x\nvariables: {n: " + "9" * 100_000 + "}\nblocks: []\n",
    '{"id": "x", "variables": {"n": ' + "9" * 100_000 + '}, "blocks": []}',
    'id: x\nblocks: [{id: a, type: set, with: {t: "\\ud800"}}]\n',
    "id: x\nblocks: [{id: a, type: condition, with: {cases: true}}]\n",
    "id: x\nblocks: [{id: a, type: set, with: {v: {expr: 'await x'}}}]\n",
    "id: x\nblocks: [{id: a, type: set, with: {v: {expr: '" + "(1)" + ".real" * 40 + "'}}}]\n",
    "id: x\ninputs: {n: {type: numbr}}\nblocks: []\n",
    "id: x\ninputs: {n: {type: string, pattern: '['}}\nblocks: []\n",
    "- just\n- a list\n", "", "null", "id: [1, 2]\n", "\t\x00\x01",
], ids=["alias-bomb", "deep-yaml", "deep-json", "huge-int-yaml", "huge-int-json",
        "surrogate", "cases-true", "await", "attribute-chain", "unknown-input-type",
        "bad-pattern", "a-list", "empty", "null", "id-list", "control-chars"])
def test_known_attacks_are_refused_in_time(text):
    import flowforge
    from flowforge.errors import WorkflowError

    def load() -> None:
        try:
            flowforge.load_text(text, "attack.yaml")
        except WorkflowError as exc:
            assert str(exc)
    _timed(load)
