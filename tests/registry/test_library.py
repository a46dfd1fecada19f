"""The bundled starter library: every block is valid and reproduces its
examples (Python blocks in the sandbox, LLM blocks through a scripted model
that must receive the filled template)."""

from __future__ import annotations

import json

import pytest

from flowforge.blocks.registry_block import run_examples
from flowforge.providers.scripted import register_script, unregister_script
from flowforge.registry import library_definitions

LIBRARY = {d.id: d for d in library_definitions()}


def test_the_library_covers_text_json_math_dates_http_and_llm_work():
    tags = {tag for d in LIBRARY.values() for tag in d.tags}
    assert {"text", "json", "math", "date", "http", "summary", "extract", "classify"} <= tags
    assert all(d.metadata.created_by == "library" and d.metadata.tier == "core"
               for d in LIBRARY.values())


@pytest.mark.parametrize("block_id", sorted(i for i, d in LIBRARY.items()
                                            if d.execution_type == "python" and d.examples))
async def test_python_library_block_reproduces_its_examples(block_id):
    report = await run_examples(LIBRARY[block_id])
    assert report.passed, report.first_error
    assert len(report.results) == len(LIBRARY[block_id].examples)


@pytest.mark.parametrize("block_id", sorted(i for i, d in LIBRARY.items()
                                            if d.execution_type == "llm"))
async def test_llm_library_block_fills_its_template_and_validates_the_answer(block_id):
    definition = LIBRARY[block_id]
    example = definition.examples[0]
    prompts = []

    def model(messages, tools):
        prompts.append(messages[-1].content)
        return json.dumps(example.outputs)

    register_script(f"lib-{block_id}", model)
    try:
        report = await run_examples(definition, model=f"scripted/lib-{block_id}")
    finally:
        unregister_script(f"lib-{block_id}")
    assert report.passed, report.first_error
    text_input = example.inputs["text"]
    assert text_input in prompts[0]                      # the template was filled
    assert "{" + "text}" not in prompts[0]


async def test_an_llm_answer_that_breaks_the_schema_fails_the_test():
    register_script("lib-bad", lambda messages, tools: '{"summary": 3}')
    try:
        report = await run_examples(LIBRARY["llm_summarise"], model="scripted/lib-bad")
    finally:
        unregister_script("lib-bad")
    assert not report.passed
    assert "summary" in report.first_error


def test_the_library_is_read_once_each_caller_gets_copies_and_a_changed_file_is_read_again(
        tmp_path, monkeypatch):
    from flowforge.registry import registry as module

    for path in module.LIBRARY_DIR.glob("*.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    monkeypatch.setattr(module, "LIBRARY_DIR", tmp_path)
    reads = []
    real = module.read_definition_file
    monkeypatch.setattr(module, "read_definition_file",
                        lambda path: reads.append(path) or real(path))
    first = library_definitions()
    assert len(reads) == len(first) == len(LIBRARY)
    first[0].description = "changed by a caller"          # a copy: nobody else sees it
    again = library_definitions()
    assert len(reads) == len(first)                        # not read a second time
    assert again[0].description == LIBRARY[again[0].id].description
    edited = tmp_path / f"{again[0].id}.yaml"
    edited.write_text(edited.read_text().replace(again[0].description[:20],
                                                 "An edited description"))
    assert library_definitions()[0].description.startswith("An edited description")
