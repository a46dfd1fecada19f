"""Validation reports every problem at once, each at its place, with a hint."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ValidationFailed, WorkflowError


def problems_of(doc) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        flowforge.load(doc)
    return [str(p) for p in info.value.problems]


def test_unknown_reference_is_located_and_suggests_the_near_name():
    doc = {"id": "w", "blocks": [
        {"id": "search", "type": "set", "with": {"context": "x"}},
        {"id": "answer", "type": "set", "with": {"p": "ctx: {{serach.context}}"}},
        {"id": "reply", "type": "response", "with": {"message": "{{answer.p}}"}},
        {"id": "late", "type": "set", "with": {"q": "{{nothing.x}}"}}]}
    assert problems_of(doc) == [
        "blocks[1].with.p: unknown block 'serach' in {{serach.context}} - did you mean 'search'?",
        "blocks[3].with.q: unknown block 'nothing' in {{nothing.x}}",
    ]


def test_every_kind_of_problem_is_listed_together():
    doc = {"id": "w", "inputs": {"q": {"type": "string"}}, "variables": {"company": "Acme"},
           "blocks": [
               {"id": "a", "type": "set", "with": {}},
               {"id": "a", "type": "set", "with": {}},
               {"id": "b", "type": "agnet", "with": {}},
               {"id": "c", "type": "condition", "with": {"cases": [{"when": "a.x >", "goto": "a"}]}},
               {"id": "d", "type": "function", "with": {"functoin": "f"}},
               {"id": "e", "type": "set", "with": {"x": "{{input.qq}} {{vars.compny}} {{loop.index}}"}},
               {"id": "f", "type": "response", "after": ["zzz"], "on_error": "nobody"},
           ]}
    found = problems_of(doc)
    assert "blocks[1].id: duplicate block id 'a' (first used at blocks[0]); ids must be unique" in found
    assert any(p.startswith("blocks[2].type: unknown block type 'agnet' - did you mean 'agent'?")
               or p.startswith("blocks[2].type: unknown block type 'agnet'") for p in found)
    assert any(p.startswith("blocks[3].with.cases[0].when:") and "not a valid expression" in p
               for p in found)
    assert any(p.startswith("blocks[4].with.functoin: unknown field 'functoin' - did you mean "
                            "'function'?") for p in found)
    assert "blocks[4].with.function: required field is missing" in found
    assert any(p.startswith("blocks[5].with.x: unknown input 'qq'") for p in found)
    assert any(p.startswith("blocks[5].with.x: unknown variable 'compny'") and "'company'" in p
               for p in found)
    assert any(p.startswith("blocks[5].with.x: {{loop.index}}: `loop` is only available inside")
               for p in found)
    assert any(p.startswith("blocks[6].after: unknown block 'zzz'") for p in found)
    assert any(p.startswith("blocks[6].on_error: unknown block 'nobody'") for p in found)


def test_a_cycle_is_printed():
    doc = {"id": "w", "blocks": [
        {"id": "a", "type": "set", "with": {"v": "{{c.v}}"}},
        {"id": "b", "type": "set", "with": {"v": "{{a.v}}"}},
        {"id": "c", "type": "set", "with": {"v": "{{b.v}}"}}]}
    (problem,) = problems_of(doc)
    assert "cycle: " in problem
    cycle = problem.split("cycle: ")[1].split(" -> ")
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["a", "b", "c"]


def test_a_condition_cannot_route_to_a_block_before_it():
    doc = {"id": "w", "blocks": [
        {"id": "a", "type": "set", "with": {"v": 1}},
        {"id": "gate", "type": "condition", "with": {"cases": [{"when": "a.v > 0", "goto": "a"}]}}]}
    assert any("cycle:" in p for p in problems_of(doc))


def test_static_types_are_checked_but_templated_values_wait_for_the_run():
    doc = {"id": "w", "inputs": {"n": {"type": "integer"}}, "blocks": [
        {"id": "each", "type": "parallel", "with": {"for_each": [1], "max_concurrency": "many"},
         "blocks": [{"id": "x", "type": "set", "with": {}}]},
        {"id": "each2", "type": "parallel",
         "with": {"for_each": [1], "max_concurrency": "{{input.n}}"},
         "blocks": [{"id": "y", "type": "set", "with": {}}]}]}
    found = problems_of(doc)
    assert len(found) == 1 and found[0].startswith("blocks[0].with.max_concurrency:")


def test_containers_hide_their_children_from_outside():
    doc = {"id": "w", "blocks": [
        {"id": "repeat", "type": "loop", "with": {"times": 2},
         "blocks": [{"id": "inner", "type": "set", "with": {"v": 1}}]},
        {"id": "out", "type": "set", "with": {"v": "{{inner.v}}"}}]}
    (problem,) = problems_of(doc)
    assert problem.startswith("blocks[1].with.v: block 'inner' in {{inner.v}} is inside a "
                              "container")


def test_a_container_without_children_says_where_they_go():
    doc = {"id": "w", "blocks": [
        {"id": "repeat", "type": "loop", "with": {"times": 2}},
        {"id": "each", "type": "parallel", "with": {"for_each": [1, 2], "blocks": [
            {"id": "inner", "type": "set", "with": {"v": 1}}]}},
        {"id": "plain", "type": "set", "with": {"v": 1},
         "blocks": [{"id": "child", "type": "set", "with": {"v": 1}}]}]}
    found = problems_of(doc)
    assert "blocks[0].blocks: a loop block needs child `blocks:`" in found
    # child blocks written under `with:` by mistake: the place they belong is named
    assert "blocks[1].blocks: a parallel block needs child `blocks:` beside `with:`, " \
           "not inside it" in found
    assert "blocks[2].blocks: block type 'set' cannot hold child blocks" in found


def test_malformed_yaml_names_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("id: x\nblocks:\n  - id: a\n    type: [set\n")
    with pytest.raises(WorkflowError) as info:
        flowforge.load(path)
    assert str(info.value).startswith(f"{path}: invalid YAML at line 5")


def test_document_level_errors_are_located(tmp_path):
    path = tmp_path / "w.json"
    path.write_text('{"id": "has space", "blocks": [{"id": "a", "type": "set", "wiht": {}}], '
                    '"version": 2}')
    with pytest.raises(ValidationFailed) as info:
        flowforge.load(path)
    found = [str(p) for p in info.value.problems]
    assert any(p.startswith("version:") for p in found)
    assert any(p.startswith("id:") for p in found)
    assert "blocks[0].wiht: unknown field 'wiht' - did you mean 'with'?" in found


def test_missing_file_and_invalid_json_are_clear(tmp_path):
    with pytest.raises(WorkflowError, match="no such workflow file"):
        flowforge.load(tmp_path / "nope.yaml")
    bad = tmp_path / "w.json"
    bad.write_text('{"id": "x",\n "blocks": [}')
    with pytest.raises(WorkflowError, match=r"invalid JSON at line 2, column 13"):
        flowforge.load(bad)


async def test_inputs_that_do_not_match_are_rejected_and_recorded():
    from flowforge.storage import storage_from_url

    doc = {"id": "w", "inputs": {"n": {"type": "integer"}, "tag": {"type": "string",
                                                                    "default": "x"}},
           "blocks": [{"id": "a", "type": "set", "with": {"v": "{{input.n}}"}}]}
    result = await flowforge.run(doc, {"n": "three", "extra": 1})
    assert result.status == "failed"
    assert "input 'n': 'three' is not of type 'integer'" in result.error
    assert "input 'extra' is not declared" in result.error
    storage = storage_from_url()
    await storage.open()
    row = await storage.get_run(result.run_id)
    await storage.close()
    assert row["status"] == "failed" and "'three' is not of type" in row["error"]
    ok = await flowforge.run(doc, {"n": 3}, storage=False)
    assert ok.results["a"] == {"v": 3}


async def test_templated_config_that_resolves_to_a_bad_type_fails_the_block_clearly():
    doc = {"id": "w", "inputs": {"n": {"type": "string"}}, "blocks": [
        {"id": "each", "type": "parallel", "with": {"for_each": [1], "max_concurrency": "{{input.n}}"},
         "blocks": [{"id": "y", "type": "set", "with": {}}]}]}
    result = await flowforge.run(doc, {"n": "lots"}, storage=False)
    assert result.status == "failed"
    assert result.blocks["each"].error.startswith(
        "invalid configuration after resolving templates: with.max_concurrency:")


def test_a_misspelt_namespace_or_key_gets_a_did_you_mean():
    """`{{inptu.query}}` is far likelier a misspelt `input` than a missing
    block, and `retyr:` a misspelt `retry:` (issue 44)."""
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load_text("id: t\ninputs: {query: {type: string}}\nblocks:\n"
                  "  - {id: a, type: set, with: {v: '{{inptu.query}}'}}\n")
    assert [str(p) for p in caught.value.problems] == [
        "blocks[0].with.v: unknown block 'inptu' in {{inptu.query}} - did you mean 'input'?"]
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load_text("id: t\nbudjet: {tokens: 5}\ntriggers: [{cron: '0 7 * * *', timzone: UTC}]\n"
                  "blocks:\n  - {id: a, type: set, retyr: 2, with: {v: 1}}\n")
    assert sorted(str(p) for p in caught.value.problems) == [
        "blocks[0].retyr: unknown field 'retyr' - did you mean 'retry'?",
        "budjet: unknown field 'budjet' - did you mean 'budget'?",
        "triggers[0].timzone: unknown field 'timzone' - did you mean 'timezone'?"]


def test_a_template_that_is_not_one_path_is_located_whatever_it_names():
    """`{{ input.n + }}` once passed validation when no inputs were declared
    (and `{{ a.x * 2 }}` on a block with open outputs), then resolved to None
    at run time; a path that is one still passes."""
    doc = {"id": "w", "blocks": [
        {"id": "a", "type": "function", "with": {"function": "f"}},
        {"id": "b", "type": "set", "with": {
            "sum": "{{ input.n + }}", "twice": "n is {{ a.x * 2 }}", "who": "{{user.id}}",
            "call": "{{ upper(input.q) }}",
            "fine": "{{ a.results[0].content }} {{ input.n }} {{loop_free.x}}"}},
        {"id": "loop_free", "type": "set", "with": {"x": 1}}]}
    found = problems_of(doc)
    assert [p.split(":")[0] for p in found] == ["blocks[1].with.sum", "blocks[1].with.twice",
                                                "blocks[1].with.call"]
    assert found[0] == (
        "blocks[1].with.sum: {{ input.n + }} is not a reference: a template holds one path such "
        "as {{input.name}} or {{block.field}} ('n +' is not a name); write arithmetic or a "
        "comparison as an expression, e.g. {expr: \"a.x * 2\"}")
