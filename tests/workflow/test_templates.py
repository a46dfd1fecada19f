"""Templates and expressions behave exactly as DESIGN.md says."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.workflow import expressions, templates


def resolve(value, scope):
    compiled = templates.compile_value(value)
    return value if compiled is None else compiled(scope)


SCOPE = {"search": {"results": [{"content": "first"}, {"content": "second"}], "total": 2,
                    "meta": {"k": [1, 2]}},
         "input": {"query": "refund", "n": 3, "amount": 300.0, "rate": 0.25},
         "vars": {"company": "Acme"}}


@pytest.mark.parametrize("template, expected", [
    ("{{search.results}}", SCOPE["search"]["results"]),          # whole string: raw value
    ("{{ search.total }}", 2),
    ("{{search.results.0.content}}", "first"),                    # list index
    ("{{search.results[1].content}}", "second"),
    ("{{search.results.length}}", 2),
    ("Q: {{input.query}} ({{search.total}})", "Q: refund (2)"),    # interpolation
    ("meta={{search.meta}}", 'meta={"k": [1, 2]}'),               # dicts as JSON
    ("Refund {{input.amount}} EUR?", "Refund 300 EUR?"),          # a whole float reads whole
    ("rate {{input.rate}}", "rate 0.25"),
    ("{{input.amount}}", 300.0),                                   # the raw value is kept
    ("{{search.missing.deeper}}", None),                           # missing path -> None
    ("[{{search.missing}}]", "[]"),
    ("{{search.results.9.content}}", None),
    ("no templates here", "no templates here"),
])
def test_template_resolution(template, expected):
    assert resolve(template, SCOPE) == expected


def test_nested_values_and_expressions_resolve_together():
    value = {"a": ["{{input.n}}", {"b": {"expr": "input.n * 2 + len(search.results)"}}],
             "static": 1}
    assert resolve(value, SCOPE) == {"a": [3, {"b": 8}], "static": 1}


def test_names_are_normalised_like_sim():
    assert templates.normalize_name("Customer Support Agent") == "customersupportagent"
    doc = {"id": "w", "blocks": [
        {"id": "agent1", "name": "Customer Support Agent", "type": "set", "with": {"v": 7}},
        {"id": "reply", "type": "set", "with": {"v": "{{customersupportagent.v}}"}}]}
    result = flowforge.run_sync(doc, storage=False)
    assert result.results["reply"] == {"v": 7}


@pytest.mark.parametrize("source, scope, expected", [
    ("grade.accuracy >= 8 and not review.flagged", {"grade": {"accuracy": 9},
                                                    "review": {"flagged": False}}, True),
    ("'refund' in input.query", {"input": {"query": "a refund please"}}, True),
    ("len(items) * 2 + 1", {"items": [1, 2, 3]}, 7),
    ("{{grade.accuracy}} >= 8", {"grade": {"accuracy": 5}}, False),
    ("results.count", {"results": {"count": 4}}, 4),         # a field, not the dict method
    ("missing.value == None", {"missing": {}}, True),
    ("x if flag else y", {"flag": False, "x": 1, "y": 2}, 2),
])
def test_expressions(source, scope, expected):
    assert expressions.compile_expression(source).evaluate(scope) == expected


@pytest.mark.parametrize("source", [
    "().__class__.__bases__",
    "__import__('os')",
    "[x for x in range(10)]",
    "lambda: 1",
])
def test_expressions_are_sandboxed(source):
    with pytest.raises(expressions.ExpressionError):
        compiled = expressions.compile_expression(source)
        compiled.evaluate({})


def test_expression_errors_read_well():
    with pytest.raises(expressions.ExpressionError, match="unknown name 'nope'"):
        expressions.compile_expression("nope > 1").evaluate({})
    with pytest.raises(expressions.ExpressionError, match="may be missing"):
        expressions.compile_expression("a.b > 1").evaluate({"a": {}})
