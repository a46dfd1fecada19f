"""n8n workflows import: a corpus of real public files (tests/formats/corpus/
SOURCES.md) converts, validates, and the fully converted ones run on a
scripted model; broken files are named, never a traceback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from flowforge.blocks.type_table import block_types
from flowforge.errors import ValidationFailed
from flowforge.formats import FormatError, ImportRefused, import_data, import_file, read_foreign
from flowforge.providers.scripted import register_script, unregister_script
from flowforge.service.loading import load
from flowforge.service.runs import run

CORPUS = Path(__file__).parent / "corpus" / "n8n"

#: file -> (titles of the nodes without a counterpart, inputs of a scripted run
#: or None when the file cannot run offline)
EXPECTED = {
    "demo_workflow.json": ([], {"chatInput": "Hello"}),
    "ai_agent_chat.json": ([], {"chatInput": "Hello"}),
    "force_output_format.json": ([], {}),
    "agent_node_sample.json": ([], {"body": {"query": "Hello", "session_id": "s1"}}),
    "summarize_youtube.json": ([], None),        # calls the file's placeholder URL
    "jina_web_scraping.json": (["Save to Google Sheets"], None),
    "github_docs_rag.json": (["Pinecone Vector Store", "Default Data Loader",
                              "Generate Embeddings", "Recursive Character Text Splitter"], None),
    "scrape_and_summarize.json": (["Extract essay names", "Extract title"], None),
    "ask_a_human.json": (["Check if user has provided email",
                          "Prompt the user to provide an email", "Message Slack for help",
                          "Confirm that we've messaged a human", "Not sure?"], None),
    "email_routing_classifier.json": (["Prod. Dep.", "Quote Dep.", "Gen. Dep.", "Order Dep.",
                                       "Other Dep.", "Quote DB", "Prod DB", "General DB",
                                       "Order DB", "Other DB"], None),
}


def _check_valid(document: dict) -> None:
    """Valid for flowforge's own loader; until the `unsupported` block type
    is registered, its blocks are the only problem allowed."""
    try:
        load(document)
    except ValidationFailed as exc:
        problems = [p for p in exc.problems
                    if not ("unsupported" not in block_types()
                            and "unknown block type 'unsupported'" in p.message)]
        assert not problems, problems


def _answer(messages, tools):
    asked = " ".join(str(message.content) for message in messages)
    return {"state": "Alaska", "cities": []} if "largest states" in asked else "Hi there"


def test_the_corpus_is_the_expected_files():
    files = {path.name for path in CORPUS.glob("*.json")}
    assert files == set(EXPECTED) | {"lemlist_gpt3_glued.json"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_imports_and_validates(name):
    missing, inputs = EXPECTED[name]
    imported = import_file(CORPUS / name, partial=True)
    assert [node.title for node in imported.report.unsupported] == missing
    data = json.loads((CORPUS / name).read_text())
    reported = {node.title for node in imported.report.nodes}
    assert reported == {node["name"] for node in data["nodes"]
                        if not node["type"].endswith("stickyNote")}, "a node went unreported"
    layout = imported.document["metadata"]["layout"]
    assert set(layout) <= {block["id"] for block in imported.document["blocks"]}
    if missing:
        with pytest.raises(ImportRefused, match=f"{len(missing)} node"):
            import_file(CORPUS / name)
    _check_valid(imported.document)


@pytest.mark.parametrize("name", sorted(n for n, (missing, inputs) in EXPECTED.items()
                                        if inputs is not None))
def test_fully_converted_file_runs_on_a_scripted_model(name):
    imported = import_file(CORPUS / name)
    register_script("n8n_corpus", _answer)
    try:
        result = asyncio.run(run(imported.document, EXPECTED[name][1],
                                 model="scripted/n8n_corpus", storage=False))
    finally:
        unregister_script("n8n_corpus")
    assert result.status == "succeeded", result.error or result.blocks


def test_agent_with_model_memory_and_references():
    imported = import_file(CORPUS / "agent_node_sample.json")
    blocks = {block["id"]: block for block in imported.document["blocks"]}
    agent = blocks["ai_agent"]
    assert agent["name"] == "AI Agent" and agent["after"] == ["prep_input_fields"]
    assert agent["with"]["model"] == "anthropic/claude-3-5-haiku-20241022"
    assert agent["with"]["prompt"] == "{{prep_input_fields.query}}"      # $('Prep ...')
    assert agent["with"]["conversation"] == "{{prep_input_fields.session_id}}"
    assert blocks["prep_input_fields"]["with"]["query"] == "{{input.body.query}}"   # $json
    assert blocks["respond_to_webhook"]["type"] == "response"
    assert imported.document["metadata"]["layout"]["ai_agent"] == {"x": 1040, "y": 400}


def test_classifier_becomes_a_router_with_one_branch_per_category():
    imported = import_file(CORPUS / "email_routing_classifier.json", partial=True)
    blocks = {block["id"]: block for block in imported.document["blocks"]}
    router = blocks["text_classifier"]
    assert router["type"] == "router" and router["with"]["model"] == "openai/gpt-4o-mini"
    assert "{{input.message}}" in router["with"]["prompt"]      # the form's "Message" field
    branches = [b for b in blocks.values() if b.get("after") == ["text_classifier"]]
    data = json.loads((CORPUS / "email_routing_classifier.json").read_text())
    classifier = next(n for n in data["nodes"] if n["name"] == "Text Classifier")
    categories = [c["category"] for c in classifier["parameters"]["categories"]["categories"]]
    assert [b["name"] for b in branches] == [*categories, "Other"] and len(categories) == 4
    assert blocks["quote_dep"]["after"] == [branches[0]["id"]]


def test_vector_store_tool_searches_a_knowledge_base_to_create():
    imported = import_file(CORPUS / "github_docs_rag.json", partial=True)
    agent = next(b for b in imported.document["blocks"] if b["type"] == "agent")
    assert agent["with"]["tools"] == [{
        "knowledge_search": {"knowledge_base": "n8n_demo"}, "name": "github_openapi_specification",
        "description": "Use this tool to get information about the GitHub API. This database "
                       "contains OpenAPI v3 specifications."}]
    assert imported.report.knowledge_bases == ["n8n_demo"]


def _flow(nodes, connections=None):
    return {"nodes": nodes, "connections": connections or {}}


def _node(name, type_, **parameters):
    return {"name": name, "type": type_, "typeVersion": 2, "position": [0, 0],
            "parameters": parameters}


def test_if_becomes_a_condition_and_unmapped_expressions_are_reported():
    data = _flow([_node("Start", "n8n-nodes-base.manualTrigger"),
                  _node("Score", "n8n-nodes-base.set", values={"number": [
                      {"name": "score", "value": 7}]}),
                  _node("High?", "n8n-nodes-base.if", conditions={"conditions": [
                      {"leftValue": "={{ $json.score }}", "rightValue": 5,
                       "operator": {"type": "number", "operation": "gt"}}],
                      "combinator": "and"}),
                  _node("Yes", "n8n-nodes-base.set", values={"string": [
                      {"name": "when", "value": "={{ $now.toISO() }}"}]}),
                  _node("No", "n8n-nodes-base.noOp")],
                 {"Start": {"main": [[{"node": "Score", "type": "main", "index": 0}]]},
                  "Score": {"main": [[{"node": "High?", "type": "main", "index": 0}]]},
                  "High?": {"main": [[{"node": "Yes", "type": "main", "index": 0}],
                                     [{"node": "No", "type": "main", "index": 0}]]}})
    imported = import_data(data)
    blocks = {block["id"]: block for block in imported.document["blocks"]}
    assert blocks["high"]["with"] == {"cases": [{"when": "score.score > 5", "goto": "yes"}],
                                      "default": "no"}
    assert imported.report.notes == ["'Yes': the n8n expression {{ $now.toISO() }} has no "
                                     "flowforge counterpart; rewrite it as a reference "
                                     "({{block.field}}) or an expression"]
    result = asyncio.run(run(imported.document, {}, storage=False))
    assert result.status == "succeeded"
    assert result.blocks["no"].status == "skipped"


@pytest.mark.parametrize("data, message", [
    (_flow([_node("Start", "n8n-nodes-base.manualTrigger"), {"name": "Ask", "parameters": {}}]),
     r"<f>: nodes\[1\] \('Ask'\): the node has no `type`"),
    ({"nodes": {"Start": {}}, "connections": {}},
     r"<f>: nodes: must be a list of nodes, not dict"),
    (_flow([_node("Start", "n8n-nodes-base.manualTrigger")],
           {"Start": {"main": [[{"node": "Gone", "type": "main", "index": 0}]]}}),
     r"<f>: connections\['Start'\].main\[0\]\[0\]: unknown node 'Gone'"),
])
def test_broken_files_name_the_place(data, message):
    with pytest.raises(FormatError, match=message):
        import_data(data, source="<f>", format="n8n")


def test_the_glued_corpus_file_is_named_as_such():
    with pytest.raises(FormatError, match="two JSON documents glued together: the second "
                                          "starts at line 397, column 2"):
        read_foreign(CORPUS / "lemlist_gpt3_glued.json")
