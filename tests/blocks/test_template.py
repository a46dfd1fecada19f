"""Jinja2 templates (Dify's template-transform) render on Jinja2's sandboxed
environment, within the run's value limit and a time limit: a template that
would make a huge value fails the block saying which limit, before the
memory is spent."""

from __future__ import annotations

import asyncio
import time

import pytest

import flowforge
from flowforge.blocks import _jinja
from flowforge.errors import ValidationFailed

LOOP = "{% for item in items %}- {{ item.title }} ({{ item.score }})\n{% endfor %}" \
       "Total: {{ items | length }}"


def _doc(template: str, variables: dict | None = None) -> dict:
    return {"version": 1, "id": "t", "inputs": {"items": {"type": "array", "default": []}},
            "blocks": [{"id": "report", "type": "template",
                        "with": {"template": template, "variables": variables or {}}}]}


def _run(doc: dict, inputs: dict | None = None):
    return asyncio.run(flowforge.run(doc, inputs or {}, storage=False))


def test_loops_filters_and_references_render():
    items = [{"title": "a", "score": 1}, {"title": "b", "score": 2}]
    result = _run(_doc(LOOP, {"items": "{{input.items}}"}), {"items": items})
    assert result.status == "succeeded", result.blocks
    assert result.results["report"] == {"output": "- a (1)\n- b (2)\nTotal: 2"}


def test_the_sandbox_keeps_python_internals_out():
    result = _run(_doc("{{ x.__class__.__mro__ }}", {"x": "s"}))
    assert result.blocks["report"].status == "failed"
    assert "unsafe" in result.blocks["report"].error or "not" in result.blocks["report"].error
    result = _run(_doc("{{ items.append(1) }}", {"items": [1]}))      # immutable
    assert result.blocks["report"].status == "failed"


def test_syntax_errors_and_unknown_names_are_refused_with_the_place():
    with pytest.raises(ValidationFailed, match=r"blocks\[0\]\.with\.template: Jinja2 line 2"):
        flowforge.load(_doc("ok\n{% for x in %}"))
    with pytest.raises(ValidationFailed, match=r"blocks\[0\]\.with\.variables: the template "
                                               r"reads 'arg1'"):
        flowforge.load(_doc("{{ arg1 }}"))


@pytest.mark.parametrize("template", [
    "{{ 'x' * 100000000 }}",
    "{{ 'x' | center(100000000) }}",
    "{{ 'x'.ljust(100000000) }}",
    "{{ '%100000000d' % 1 }}",
    "{{ '{:>100000000}'.format(1) }}",
    "{{ 10 ** 100000 }}",
    "{% macro d(s, n) %}{{ d(s ~ s, n - 1) if n else s }}{% endmacro %}{{ d('x', 60) }}",
    "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}{{ ns.s }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}"
    "{% endfor %}",
], ids=["repeat", "center", "ljust", "percent-width", "format-width", "power", "macro-doubling",
        "namespace-doubling", "nested-loops"])
def test_a_huge_value_fails_the_block_naming_the_limit(template, monkeypatch):
    monkeypatch.setenv(_jinja.VALUE_VARIABLE, "1")          # 1 million characters
    started = time.monotonic()
    result = _run(_doc(template))
    assert result.blocks["report"].status == "failed"
    error = result.blocks["report"].error
    assert ("over the value limit of 1,000,000 (FLOWFORGE_MAX_VALUE_MB" in error
            or "digits; the limit is 4,300" in error), error
    assert time.monotonic() - started < 5


def test_a_template_that_spins_is_stopped():
    template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(_jinja.TemplateLimit, match="rendered for more than 0.5 s"):
        _jinja.render(template, {}, limit=1000, seconds=0.5)


def test_the_value_limit_is_the_engines():
    from flowforge.engine.limits import LIMIT_SETTINGS

    assert LIMIT_SETTINGS[_jinja.VALUE_SERVICE] == (_jinja.VALUE_VARIABLE, _jinja.VALUE_DEFAULT_MB)
    assert _jinja.value_limit({"max_value_mb": 2}) == 2_000_000
