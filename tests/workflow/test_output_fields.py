"""Validation knows what every block gives (issue 25): a reference to a field
a block does not give is refused with its place and a did-you-mean, in every
kind of block whose output the document tells, and never for a block whose
output is open.  A table of named document shapes, as Haystack tests its
pipelines."""

from __future__ import annotations

import logging

import pytest

import flowforge
from flowforge.blocks import BlockType
from flowforge.errors import ValidationFailed

ASSESS = {"id": "assess", "type": "set", "with": {"amount": "{{input.amount}}", "vip": True}}


def doc(*blocks: dict, **top) -> dict:
    return {"id": "t", "inputs": {"amount": {"type": "number"}}, **top, "blocks": list(blocks)}


def say(text: str, block_id: str = "out") -> dict:
    return {"id": block_id, "type": "response", "with": {"message": text}}


def llm(block_id: str, **with_) -> dict:
    return {"id": block_id, "type": "llm", "with": {"prompt": "p", "model": "scripted/x", **with_}}


LOOP = {"id": "refine", "type": "loop", "with": {"until": "judge.score >= 1", "times": 3},
        "blocks": [{"id": "judge", "type": "set",
                    "with": {"score": {"expr": "loop.index"},
                             "before": "{{loop.previous.judge.score}}"}}]}
EVAL = {"id": "grade", "type": "evaluator",
        "with": {"content": "x", "model": "scripted/x",
                 "metrics": [{"name": "Accuracy"}, {"name": "Response Time"}]}}

REFUSED = {
    "set: a misspelt key": (
        doc(ASSESS, say("{{assess.amout}}")),
        "blocks[1].with.message", "block 'assess' has no output 'amout' in {{assess.amout}} - "
        "did you mean 'amount'?; its outputs: amount, vip"),
    "set: read through an expression": (
        doc(ASSESS, {"id": "calc", "type": "set", "with": {"x": {"expr": "assess.vipp and 1"}}}),
        "blocks[1].with.x.expr", "no output 'vipp' in assess.vipp and 1 - did you mean 'vip'?"),
    "set: read by its normalised name": (
        doc({**ASSESS, "name": "The Assessment"}, say("{{theassessment.amout}}")),
        "blocks[1].with.message", "block 'theassessment' has no output 'amout'"),
    "condition: a case reads a missing field": (
        doc(ASSESS, say("a", "yes"), say("b", "no"),
            {"id": "gate", "type": "condition",
             "with": {"cases": [{"when": "assess.amont > 5", "goto": "yes"}], "default": "no"}}),
        "blocks[3].with.cases[0].when", "no output 'amont' in assess.amont > 5 - did you mean "
        "'amount'?"),
    "condition: its own output fields": (
        doc(ASSESS, say("a", "yes"), {"id": "gate", "type": "condition",
                                      "with": {"cases": [{"when": "true", "goto": "yes"}]}},
            say("{{gate.selectedpath}}", "after")),
        "blocks[3].with.message", "did you mean 'selectedPath'?"),
    "evaluator: a metric's key": (
        doc(EVAL, say("{{grade.response_tme}}")),
        "blocks[1].with.message", "did you mean 'response_time'?"),
    "response: its fields": (
        doc(say("hi", "first"), say("{{first.mesage}}")),
        "blocks[1].with.message", "did you mean 'message'?"),
    "router: its fields": (
        doc({"id": "triage", "type": "router", "with": {"prompt": "p", "model": "scripted/x"}},
            say("{{triage.selectedroute}}")),
        "blocks[1].with.message", "did you mean 'selectedRoute'?"),
    "input block: the declared inputs and timestamp": (
        doc({"id": "start", "type": "input"}, say("{{start.amout}} {{start.timestamp}}")),
        "blocks[1].with.message", "did you mean 'amount'?; its outputs: amount, timestamp"),
    "llm without a schema: content and usage": (
        doc(llm("ask"), say("{{ask.text}}")),
        "blocks[1].with.message", "its outputs: content, cost, model, tokens"),
    "llm with an output schema: its properties": (
        doc(llm("ask", output_schema={"type": "object", "properties": {"summary": {}}}),
            say("{{ask.sumary}}")),
        "blocks[1].with.message", "did you mean 'summary'?"),
    "agent with a response format and no tools": (
        doc({"id": "a", "type": "agent", "with": {
            "prompt": "p", "model": "scripted/x",
            "response_format": {"type": "object", "properties": {"answer": {}}}}},
            say("{{a.answr}}")),
        "blocks[1].with.message", "did you mean 'answer'?"),
    "loop: its children, iterations and count": (
        doc(LOOP, say("{{refine.jugde.score}}")),
        "blocks[1].with.message", "did you mean 'judge'?; its outputs: count, iterations, judge"),
    "loop: `until` reads a child's missing field": (
        doc({**LOOP, "with": {"until": "judge.scor >= 1", "times": 3}}),
        "blocks[0].with.until", "block 'judge' has no output 'scor'"),
    "loop: loop.previous names no child": (
        doc({**LOOP, "blocks": [{"id": "judge", "type": "set",
                                 "with": {"score": 1, "p": "{{loop.previous.jduge}}"}}]}),
        "blocks[0].blocks[0].with.p", "no block 'jduge' in this loop in "
        "{{loop.previous.jduge}} - did you mean 'judge'?"),
    "loop: loop.previous reads a child's missing field": (
        doc({**LOOP, "blocks": [{"id": "judge", "type": "set",
                                 "with": {"score": 1, "p": "{{loop.previous.judge.scre}}"}}]}),
        "blocks[0].blocks[0].with.p", "block 'judge' has no output 'scre'"),
    "parallel: results and count": (
        doc({"id": "each", "type": "parallel", "with": {"for_each": [1, 2]},
             "blocks": [{"id": "twice", "type": "set", "with": {"v": "{{loop.item}}"}}]},
            say("{{each.result}}")),
        "blocks[1].with.message", "did you mean 'results'?"),
    "a child reads an outer block": (
        doc(ASSESS, {"id": "each", "type": "parallel", "with": {"for_each": [1]},
                     "blocks": [{"id": "c", "type": "set", "with": {"v": "{{assess.vp}}"}}]}),
        "blocks[1].blocks[0].with.v", "block 'assess' has no output 'vp'"),
}


@pytest.mark.parametrize("shape", list(REFUSED))
def test_a_field_the_block_does_not_give_is_refused_with_its_place(shape):
    document, where, words = REFUSED[shape]
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(document)
    problems = [str(p) for p in caught.value.problems]
    assert any(p.startswith(f"{where}: ") and words in p for p in problems), problems


ACCEPTED = {
    "every field a block gives": doc(
        ASSESS, EVAL, LOOP, llm("ask"),
        {"id": "each", "type": "parallel", "with": {"for_each": [1, 2]},
         "blocks": [{"id": "twice", "type": "set", "with": {"v": "{{loop.item}}"}}]},
        say("{{assess.amount}} {{assess.vip}} {{grade.accuracy}} {{grade.response_time}} "
            "{{grade.content}} {{grade.evaluation}} {{refine.judge.score}} {{refine.count}} "
            "{{refine.iterations}} {{ask.content}} {{ask.tokens.total}} {{each.results}} "
            "{{each.count}}")),
    "deeper paths are not checked": doc(ASSESS, say("{{assess.amount.digits}}")),
    "a whole output": doc(ASSESS, say("{{assess}}")),
    "an agent without a schema is open": doc(
        {"id": "a", "type": "agent", "with": {"prompt": "p", "model": "scripted/x"}},
        say("{{a.anything_at_all}}")),
    "an agent with tools is open (a finishing tool gives its own fields)": doc(
        {"id": "a", "type": "agent", "with": {
            "prompt": "p", "model": "scripted/x", "tools": ["lookup"],
            "response_format": {"type": "object", "properties": {"answer": {}}}}},
        say("{{a.sources}}")),
    "a schema that allows more is open": doc(
        llm("ask", output_schema={"type": "object", "properties": {"a": {}},
                                  "additionalProperties": True}), say("{{ask.b}}")),
    "a function's output is open": doc(
        {"id": "f", "type": "function", "with": {"function": "anything"}}, say("{{f.whatever}}")),
    "an input block without declared inputs is open": {
        "id": "t", "blocks": [{"id": "start", "type": "input"}, say("{{start.anything}}")]},
    "templated evaluator metrics are open": doc(
        {"id": "grade", "type": "evaluator", "with": {"content": "x", "model": "scripted/x",
                                                      "metrics": "{{input.amount}}"}},
        say("{{grade.whatever}}")),
}


@pytest.mark.parametrize("shape", list(ACCEPTED))
def test_fields_a_block_gives_or_may_give_are_accepted(shape):
    flowforge.load(ACCEPTED[shape])



class _TrippingBlock(BlockType):
    """A plugin whose `output_fields` hook has a bug."""

    type_name = "test_tripping_outputs"

    @classmethod
    def output_fields(cls, spec, doc):
        raise KeyError("no such setting")

    @classmethod
    async def run(cls, context, config):
        return {}


def test_a_hook_that_raises_leaves_the_output_open_and_is_logged(monkeypatch, caplog):
    """A plugin's bug neither crashes validate nor refuses a right document;
    it is logged (once per place that asks), naming the block type and the block."""
    from flowforge.blocks import type_table
    from flowforge.server.document_view import graph_view

    monkeypatch.setitem(type_table._TYPES, _TrippingBlock.type_name, _TrippingBlock)
    with caplog.at_level(logging.WARNING, logger="flowforge.workflow.output_check"):
        compiled = flowforge.load(doc({"id": "odd", "type": "test_tripping_outputs"},
                                      say("{{odd.anything}}")))
        view = graph_view(compiled)
    logged = [r for r in caplog.records if "output_fields raised" in r.getMessage()]
    assert len(logged) == 2, caplog.records                    # validation, then the view
    for record in logged:
        assert "block type 'test_tripping_outputs'" in record.getMessage()
        assert "blocks[0]" in record.getMessage() and record.exc_info[0] is KeyError
    odd = next(node for node in view["nodes"] if node["id"] == "odd")
    assert "outputs" not in odd                                # open: an editor offers none
