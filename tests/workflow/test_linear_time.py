"""No text or pattern a user sends can hold the process (issue 23): template
and schema-notation parsing are linear, and user-supplied regular expressions
(JSON-schema `pattern`, tool-validation patterns) run on RE2.  Each input
below once took seconds to minutes; each must now be answered at once, and
still answered correctly."""

from __future__ import annotations

import time

import pytest

import flowforge
from flowforge.workflow.notation import NotationError, notation_to_schema
from flowforge.engine.inputs import validate_inputs
from flowforge.errors import InputError, ValidationFailed
from flowforge.registry.model import definition_from_data
from flowforge.tools.validation import ToolValidation
from flowforge.workflow import templates

#: the slowest any one of these may take; the originals took 5 s to 36 s
BOUND = 1.0
EVIL = "^(a+)+$"
EVIL_TEXT = "a" * 29 + "!"          # 18 s under Python's `re`, doubling per `a`


def timed(fn, *args):
    started = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - started


@pytest.mark.parametrize("text", [
    "{{" + " " * 3000,                                  # the reported 24 s case
    "{{" + " " * 200_000 + "x",
    "{{ a" + " " * 100_000 + "}",
    "{{ " * 50_000,
])
def test_unclosed_templates_are_scanned_in_linear_time(text):
    refs, seconds = timed(lambda t: list(templates.references_in(t, "with.prompt")), text)
    assert refs == [] and seconds < BOUND
    assert templates.compile_value(text) is None


def test_templates_still_read_the_same_after_the_linear_rewrite():
    refs = list(templates.references_in("a {{ input.x }} b {{{y.z}}} {{a}b}} {{  }}", "w"))
    assert [(r.path, r.text) for r in refs] == [(("input", "x"), "{{ input.x }}"),
                                                (("y", "z"), "{{y.z}}"), ((), "{{  }}")]
    assert templates.compile_value("hi {{  input.name }}!")({"input": {"name": "Bo"}}) == "hi Bo!"
    assert templates.compile_value(" {{ input.l }}")({"input": {"l": [1]}}) == " [1]"
    assert templates.compile_value("{{ input.l }}")({"input": {"l": [1]}}) == [1]


def test_a_document_with_a_huge_unclosed_template_validates_quickly():
    text = ("id: w\nblocks:\n  - id: s\n    type: set\n    with:\n      a: \"{{"
            + " " * 100_000 + "\"\n")
    compiled, seconds = timed(flowforge.load_text, text)
    assert seconds < BOUND and compiled.graph.nodes["s"] is not None


@pytest.mark.parametrize("notation", [
    "String" + " " * 100_000 + "x[]",
    "Array<" + " " * 100_000,
    "List<" + " " * 100_000 + "String" + " " * 100_000 + "[",
    "x" + " " * 100_000 + "[ " + " " * 100_000,
])
def test_schema_notation_with_long_runs_of_spaces_is_refused_at_once(notation):
    started = time.perf_counter()
    with pytest.raises(NotationError) as caught:
        notation_to_schema(notation)
    assert time.perf_counter() - started < BOUND
    assert len(str(caught.value)) < 300                 # the message does not echo it all


@pytest.mark.parametrize("notation, schema", [
    ("Array<String>", {"type": "array", "items": {"type": "string"}}),
    ("list < integer >", {"type": "array", "items": {"type": "integer"}}),
    ("String [ ]", {"type": "array", "items": {"type": "string"}}),
    ("Array<Array<Boolean>>", {"type": "array", "items": {"type": "array",
                                                          "items": {"type": "boolean"}}}),
    ("Array<" + " " * 50_000 + "Number" + " " * 50_000 + ">",
     {"type": "array", "items": {"type": "number"}}),
])
def test_schema_notation_reads_arrays_as_before(notation, schema):
    assert notation_to_schema(notation) == schema


def test_an_input_pattern_with_nested_quantifiers_answers_at_once():
    declared = {"code": {"type": "string", "pattern": EVIL}}
    started = time.perf_counter()
    with pytest.raises(InputError) as caught:
        validate_inputs(declared, {"code": "a" * 100_000 + "!"})
    assert time.perf_counter() - started < BOUND
    assert "does not match" in str(caught.value)
    assert validate_inputs(declared, {"code": "aaaa"}) == {"code": "aaaa"}


def test_a_registry_block_whose_example_hits_a_bad_pattern_is_checked_at_once():
    data = {"id": "slow_example", "name": "Slow example", "description": "d",
            "execution_type": "python",
            "source_code": "async def execute(inputs, context):\n    return {'x': 1}\n",
            "input_schema": {"type": "object",
                             "properties": {"s": {"type": "string", "pattern": EVIL}}},
            "output_schema": {"type": "object"},
            "examples": [{"inputs": {"s": "a" * 50_000 + "!"}, "outputs": {"x": 1}}]}
    started = time.perf_counter()
    with pytest.raises(ValidationFailed) as caught:
        definition_from_data(data)
    assert time.perf_counter() - started < BOUND
    assert "examples[0].inputs" in str(caught.value)


def test_a_pattern_the_linear_engine_cannot_run_is_a_located_validation_error():
    text = """
id: w
inputs:
  word: {type: string, pattern: '^(a)\\1$'}
blocks:
  - {id: s, type: set, with: {w: "{{input.word}}"}}
"""
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load_text(text)
    problem = caught.value.problems[0]
    assert problem.where == "inputs.word.pattern"
    assert "backreferences" in problem.message and "rewrite it" in problem.message


def test_parser_block_schema_patterns_are_checked_when_the_document_is():
    text = """
id: w
blocks:
  - id: p
    type: parser
    with:
      text: '{"a": "x"}'
      schema: {type: object, properties: {a: {type: string, pattern: '(?<=x)a'}}}
"""
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load_text(text)
    assert caught.value.problems[0].where.endswith("with.schema.properties.a.pattern")


def test_tool_validation_patterns_run_on_the_linear_engine():
    from flowforge.tools.spec import Tool
    from flowforge.tools.validation import validate_arguments

    tool = Tool(name="t", description="d", parameters={
        "type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}},
        execute=None)
    policy = ToolValidation(patterns={"evil": "(x+x+)+y"})
    problems, seconds = timed(validate_arguments, tool, {"s": "a" * 10_000 + "!"}, policy)
    assert seconds < BOUND and any("does not match" in p for p in problems)
    problems, seconds = timed(validate_arguments, tool, {"s": "x" * 10_000}, policy)
    assert seconds < BOUND and len(problems) == 1 and "does not match" in problems[0]
    assert "s: contains a refused pattern (evil)" in validate_arguments(
        tool, {"s": "aaxxy"}, policy)                    # the pattern still refuses
    with pytest.raises(ValueError, match="lookaround"):
        ToolValidation(patterns={"ahead": "a(?=b)"})
