"""Environment values and secrets are read only whole, by templates, so every
value can be recognised and redacted (issue 17): computed access in an
expression and the whole namespace are validation errors, located."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ValidationFailed


def _problems(with_: dict) -> list[str]:
    try:
        flowforge.load({"id": "x", "blocks": [{"id": "a", "type": "set", "with": with_}]})
    except ValidationFailed as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize("with_, says", [
    ({"v": "{{env}}"}, "the whole `env` namespace"),
    ({"v": "all: {{secrets}}"}, "the whole `secrets` namespace"),
    ({"v": "{{env.HOME.x}}"}, "read one value, {{env.NAME}}"),
    ({"v": {"expr": "env['HOME']"}}, "`env` cannot be used in an expression"),
    ({"v": {"expr": "upper(env.HOME)"}}, "`env` cannot be used in an expression"),
    ({"v": {"expr": "secrets.TOKEN + 'x'"}}, "`secrets` cannot be used in an expression"),
])
def test_computed_or_whole_access_is_refused(with_, says):
    problems = _problems(with_)
    assert len(problems) == 1 and problems[0].startswith("blocks[0].with.v") and says in \
        problems[0]


def test_conditions_cannot_read_env():
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load({"id": "x", "blocks": [
            {"id": "g", "type": "condition", "with": {
                "cases": [{"when": "env.STAGE == 'prod'", "goto": "b"}], "default": "b"}},
            {"id": "b", "type": "set", "with": {"v": 2}}]})
    assert caught.value.problems[0].where == "blocks[0].with.cases[0].when"


def test_whole_values_in_templates_are_fine_and_redacted(monkeypatch):
    monkeypatch.setenv("FF_REF_TOKEN", "value-0123456789")
    assert _problems({"v": "Bearer {{env.FF_REF_TOKEN}}", "s": "{{secrets.X}}"}) == []
