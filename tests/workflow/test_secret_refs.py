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
    assert _problems({"v": "Bearer {{env.FF_REF_TOKEN}}"}) == []


def _secret_problems(*blocks: dict) -> list[str]:
    try:
        flowforge.load({"id": "x", "blocks": list(blocks)})
    except ValidationFailed as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize("block", [
    {"id": "a", "type": "http", "with": {"url": "https://api.example.com/x",
                                         "headers": {"Authorization": "Bearer {{secrets.T}}"}}},
    {"id": "a", "type": "agent", "with": {"prompt": "hi", "api_key": "{{secrets.T}}"}},
    {"id": "a", "type": "llm", "with": {"prompt": "hi", "api_key": "{{secrets.T}}"}},
    {"id": "a", "type": "agent", "with": {"prompt": "hi", "tools": [
        {"mcp": {"url": "https://host/mcp", "headers": {"X-Key": "{{secrets.T}}"}}},
        {"http": {"url": "https://api.example.com/o", "headers": {"A": "{{secrets.T}}"}}}]}},
])
def test_secrets_go_into_credential_fields(block):
    assert _secret_problems(block) == []


@pytest.mark.parametrize("block, where", [
    ({"id": "a", "type": "set", "with": {"s": "{{secrets.T}}"}}, "blocks[0].with.s"),
    ({"id": "a", "type": "set", "with": {"k": {"nested": ["x {{secrets.T}}"]}}},
     "blocks[0].with.k.nested[0]"),
    ({"id": "a", "type": "agent", "with": {"prompt": "the key is {{secrets.T}}"}},
     "blocks[0].with.prompt"),
    ({"id": "a", "type": "http", "with": {"url": "https://e.com/?k={{secrets.T}}"}},
     "blocks[0].with.url"),
    ({"id": "a", "type": "loop", "with": {"times": 2}, "blocks": [
        {"id": "b", "type": "set", "with": {"s": "{{secrets.T}}"}}]},
     "blocks[0].blocks[0].with.s"),
])
def test_a_secret_anywhere_else_is_a_located_validation_error(block, where):
    """A value that could be transformed (upper(), [::-1], a dict key) would be
    stored in clear; so a secret goes only where a credential goes."""
    problems = _secret_problems(block)
    assert len(problems) == 1 and problems[0].startswith(where), problems
    assert "may only go where a credential goes" in problems[0]
