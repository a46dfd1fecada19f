"""Real Dify DSL files (tests/formats/corpus/dify, sources in SOURCES.md)
import, validate with flowforge's own loader, and those whose nodes all
convert and that reach no network run on a scripted model.  The expected
outcome of each file is the table in docs/guides/importing.md."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import flowforge
from flowforge.formats import ImportRefused, import_file

CORPUS = Path(__file__).parent / "corpus" / "dify"
FILES = sorted(CORPUS.glob("*.yml"))

#: file -> unsupported node types (a partial import); absent: fully converted
PARTIAL = {
    "AgentFlow.yml": ["agent"], "Demo-tod_agent.yml": ["agent"], "MCP-amap.yml": ["agent"],
    "MCP.yml": ["agent"], "Claude3_Code_Translation.yml": ["tool"],
    "json_translate.yml": ["tool"], "File_read.yml": ["code", "code"],
    "jieba.yml": ["code"], "json-repair.yml": ["code"], "matplotlib.yml": ["code"],
    "runLLMCode.yml": ["code", "code"],
    "simple-kimi.yml": ["tool", "tool", "tool", "tool", "document-extractor",
                        "list-operator", "list-operator", "list-operator"],
}
#: fully converted, no http or web_search block: run on the scripted model
RUNS = ["Artifact.yml", "Document_chat_template.yml", "Python_Coding_Prompt.yml",
        "SEO_Slug_Generator.yml", "translation_workflow.yml"]


def test_every_file_is_read_none_refused_by_the_loader_s_limits():
    """The 2,400-line Deep Researcher app was once refused as "nested deeper
    than 100 levels": brackets in its prompts were counted as nesting."""
    imported = import_file(CORPUS / "Deep_Researcher_On_Dify_.yml")
    assert len(imported.report.nodes) == 52 and not imported.report.unsupported


def test_the_corpus_is_real_and_large_enough():
    assert len(FILES) >= 10
    sources = (CORPUS.parent / "SOURCES.md").read_text(encoding="utf-8")
    assert all(f"`{path.name}`" in sources for path in FILES)


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_each_file_imports_and_validates(path):
    if path.name in PARTIAL:
        with pytest.raises(ImportRefused):
            import_file(path)                     # refused unless a partial import is asked
    imported = import_file(path, partial=True)
    assert [node.type for node in imported.report.unsupported] == PARTIAL.get(path.name, [])
    compiled = flowforge.load(imported.document)
    assert compiled.id
    layout = imported.document["metadata"]["layout"]
    assert set(layout) <= {spec.id for _, spec in compiled.doc.iter_blocks()}


def _value(schema: dict):
    if "default" in schema:
        return schema["default"]
    return {"string": "hello", "number": 1, "array": [], "object": {}}.get(schema.get("type"))


@pytest.mark.parametrize("name", RUNS)
def test_fully_converted_files_run_on_a_scripted_model(name, tmp_path):
    rules = tmp_path / "ok.rules.yaml"
    rules.write_text('rules: []\ndefault: "ok"\n')
    imported = import_file(CORPUS / name)
    inputs = {key: _value(schema) for key, schema in imported.document["inputs"].items()}
    result = asyncio.run(flowforge.run(imported.document, inputs, storage=False,
                                       model=f"scripted/{rules}"))
    assert result.status == "succeeded", {k: v.error for k, v in result.blocks.items()
                                          if v.error}
