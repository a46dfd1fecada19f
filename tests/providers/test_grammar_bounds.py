"""A local model's grammar carries a number's small bounds: llama.cpp's
grammars ignore minimum/maximum, and a 135M model wrote a confidence of 1e15
where at most 1 is accepted, the same at every retry (temperature 0)."""

from __future__ import annotations

from flowforge.providers.base import grammar_schema
from flowforge.providers._local_prompt import grammar_text


def test_a_bounded_number_or_integer_is_offered_only_its_values():
    schema = {"type": "object", "required": ["confidence", "stars"], "properties": {
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "free": {"type": "number"}, "wide": {"type": "integer", "minimum": 0, "maximum": 10**6}}}
    shaped = grammar_schema(schema)["properties"]
    assert shaped["confidence"]["enum"][0] == 0 and shaped["confidence"]["enum"][-1] == 1
    assert all(0 <= value <= 1 for value in shaped["confidence"]["enum"])
    assert shaped["stars"] == {"enum": [1, 2, 3, 4, 5]}
    assert shaped["free"] == {"type": "number"} and shaped["wide"]["type"] == "integer"
    gbnf = grammar_text(schema)
    assert '"0.95"' in gbnf and '"5"' in gbnf          # the choices, not any number


def test_a_score_on_a_scale_of_ten_or_a_hundred_is_held_to_its_scale():
    """The 0.5B grader answered 90 on a 0-10 scale, again at the repair, and the
    demo failed (issue 47): a wider number range is offered in steps too."""
    ten = grammar_schema({"type": "number", "minimum": 0, "maximum": 10})["enum"]
    assert ten[0] == 0 and ten[-1] == 10 and 7.5 in ten and 9 in ten and len(ten) == 101
    assert all(0 <= value <= 10 for value in ten)
    hundred = grammar_schema({"type": "number", "minimum": 0, "maximum": 100})["enum"]
    assert hundred == list(range(101))
    gbnf = grammar_text({"type": "object", "required": ["accuracy"], "properties": {
        "accuracy": {"type": "number", "minimum": 0, "maximum": 10}}})
    assert '"10"' in gbnf and '"90"' not in gbnf
    # too wide for a list of values: left to the validation after the answer
    assert grammar_schema({"type": "number", "minimum": 0, "maximum": 10**4}) == \
        {"type": "number", "minimum": 0, "maximum": 10**4}
