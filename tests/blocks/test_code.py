"""Inline Python (`type: code`, the shape of Dify's code node and Sim's
function block) runs `main`, under the very sandbox, limits and policy of
registry Python blocks; other languages and bad source are refused by
`validate` with the place."""

from __future__ import annotations

import asyncio

import pytest

import flowforge
from flowforge.blocks import registry_block
from flowforge.errors import ValidationFailed
from flowforge.registry.model import BlockDefinition

SOURCE = """import json

def main(name: str, count: int) -> dict:
    return {"greeting": "hello " + name, "double": count * 2,
            "nested": json.loads('{"a": {"b": 1}}')}
"""


def _doc(with_: dict, extra: list | None = None) -> dict:
    return {"version": 1, "id": "c", "inputs": {"name": {"type": "string"}},
            "blocks": [{"id": "shape", "type": "code", "with": with_}, *(extra or [])]}


def _run(doc: dict, inputs: dict | None = None):
    return asyncio.run(flowforge.run(doc, inputs or {"name": "Ada"}, storage=False))


def test_main_runs_with_its_inputs_and_its_dict_is_the_output():
    doc = _doc({"source": SOURCE, "inputs": {"name": "{{input.name}}", "count": 3},
                "outputs": {"greeting": "string", "double": "number", "nested": "object"}},
               [{"id": "say", "type": "response", "with": {"message": "{{shape.greeting}}"}}])
    result = _run(doc)
    assert result.status == "succeeded", result.blocks
    assert result.results["shape"] == {"greeting": "hello Ada", "double": 6,
                                       "nested": {"a": {"b": 1}}}
    assert result.outputs["say"]["message"] == "hello Ada"


def test_a_reference_to_an_undeclared_output_is_refused():
    doc = _doc({"source": SOURCE, "inputs": {"name": "x", "count": 1},
                "outputs": {"greeting": "string"}},
               [{"id": "say", "type": "response", "with": {"message": "{{shape.greting}}"}}])
    with pytest.raises(ValidationFailed, match="greting"):
        flowforge.load(doc)


@pytest.mark.parametrize("language", ["javascript", "JavaScript", "typescript"])
def test_javascript_is_reported_not_run(language):
    doc = _doc({"language": language, "source": "function main({a}) { return {a} }"})
    with pytest.raises(ValidationFailed) as refused:
        flowforge.load(doc)
    text = str(refused.value)
    assert "blocks[0].with.language" in text and "not run by flowforge" in text


def test_bad_source_is_refused_by_validate_with_its_line():
    bad = "def main(path: str) -> dict:\n    x = 1\n    return {'text': open(path).read()}\n"
    with pytest.raises(ValidationFailed) as refused:
        flowforge.load(_doc({"source": bad, "inputs": {"path": "/etc/passwd"}}))
    assert "blocks[0].with.source: line 3:" in str(refused.value)
    assert "'open' is not available" in str(refused.value)
    with pytest.raises(ValidationFailed, match=r"blocks\[0\]\.with\.source: line 2: syntax error"):
        flowforge.load(_doc({"source": "def main() -> dict:\nreturn {}\n"}))


def test_inputs_must_match_main_s_parameters():
    with pytest.raises(ValidationFailed) as refused:
        flowforge.load(_doc({"source": SOURCE, "inputs": {"name": "a", "cuont": 1}}))
    text = str(refused.value)
    assert "`main` needs the input 'count'" in text
    assert "blocks[0].with.inputs.cuont: `main` has no parameter 'cuont'" in text
    with pytest.raises(ValidationFailed, match="defines no top-level function `main`"):
        flowforge.load(_doc({"source": "def helper():\n    return {}\n"}))


def test_an_error_in_main_fails_the_block_naming_the_line():
    source = "def main(n: int) -> dict:\n    half = 1\n    return {'x': n / 0}\n"
    result = _run(_doc({"source": source, "inputs": {"n": 4}}))
    assert result.blocks["shape"].status == "failed"
    assert "ZeroDivisionError" in result.blocks["shape"].error
    assert "(line 3)" in result.blocks["shape"].error


def test_main_must_return_the_declared_fields():
    source = "def main() -> dict:\n    return {'a': 1}\n"
    result = _run(_doc({"source": source, "outputs": {"b": "string"}}))
    assert "`main` returned no 'b'" in result.blocks["shape"].error
    result = _run(_doc({"source": "def main():\n    return [1]\n"}))
    assert "`main` must return a dict" in result.blocks["shape"].error


def test_network_and_host_modules_are_refused_with_their_line():
    for module in ("socket", "os", "subprocess"):
        source = f"def main() -> dict:\n    import {module}\n    return {{}}\n"
        with pytest.raises(ValidationFailed) as refused:
            flowforge.load(_doc({"source": source}))
        assert f"blocks[0].with.source: line 2: module '{module}' is not allowed" in \
            str(refused.value)


def test_the_memory_limit_applies():
    source = "def main() -> dict:\n    big = 'x' * (200 * 1024 * 1024)\n    return {'n': len(big)}\n"
    result = _run(_doc({"source": source, "memory_mb": 64}))
    assert result.blocks["shape"].status == "failed"
    assert "exceeded its memory limit of 64 MB" in result.blocks["shape"].error


def test_it_takes_the_registry_blocks_path_to_the_sandbox(monkeypatch):
    """Same call, same limits, same isolation rule and user context as a
    registry Python block: the code block adds no second way in."""
    calls = []

    async def fake_run_python(source, inputs, **kwargs):
        calls.append(kwargs)
        from flowforge.sandbox import SandboxResult
        return SandboxResult({"returned": {"ok": 1}, "ok": 1})

    monkeypatch.setattr(registry_block, "run_python", fake_run_python)
    context = registry_block.DetachedContext(
        services={"sandbox_isolated_only": True}, user={"id": "u1", "role": "member"})
    definition = BlockDefinition(id="probe", name="Probe", description="d",
                                 execution_type="python",
                                 source_code="async def execute(inputs, context):\n    return {}\n")
    asyncio.run(registry_block.execute_definition(definition, {}, context))
    from flowforge.blocks.code import CodeBlock, CodeConfig

    context.block_id = "shape"
    asyncio.run(CodeBlock.run(context, CodeConfig(source="def main():\n    return {}\n")))
    registry_call, code_call = calls
    assert code_call["isolated_only"] is True and code_call["network"] is False
    assert code_call["limits"] == registry_call["limits"]
    assert code_call["context"]["user_id"] == registry_call["context"]["user_id"] == "u1"
