"""`export_dify`: a flowforge document as a Dify DSL app, and back.

The issue's proof: import -> export -> import gives the same document, for
every corpus file that imports fully and for documents written by hand; a
block without a Dify counterpart refuses the export with the list."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

import flowforge
from flowforge.formats import import_data, import_file
from flowforge.formats.base import ExportRefused
from flowforge.formats.dify_export import export_dify
from flowforge.service.importing import document_yaml

from tests.formats.test_dify_corpus import PARTIAL

CORPUS = Path(__file__).parent / "corpus" / "dify"
FULL = sorted(path.name for path in CORPUS.glob("*.yml") if path.name not in PARTIAL)


def _again(document: dict) -> dict:
    """Export to Dify, through the YAML text a user gets, and import again."""
    text = document_yaml(export_dify(document))
    return import_data(yaml.safe_load(text), source="exported.yml").document


def _without_origin(document: dict) -> dict:
    document = copy.deepcopy(document)
    document["metadata"].pop("imported_from", None)
    return document


@pytest.mark.parametrize("name", FULL)
def test_import_export_import_gives_the_same_document(name):
    first = import_file(CORPUS / name).document
    assert _again(first) == first


def test_every_fully_imported_corpus_file_is_checked():
    assert len(FULL) == 12


LAYOUT = {name: {"x": 100 * index, "y": 40 * index} for index, name in enumerate(
    ["search", "web", "draft", "extract", "gate", "polish", "review", "joined", "fetch",
     "items", "shout", "remember", "classify", "done", "more"])}

WRITTEN = {
    "version": 1, "id": "research-desk", "name": "Research desk",
    "description": "Drafts, checks and files a short note.",
    "inputs": {"topic": {"type": "string", "description": "The topic", "maxLength": 200},
               "tone": {"type": "string", "enum": ["formal", "casual"]},
               "depth": {"type": "number", "default": 2}},
    "variables": {"company": "Acme", "limit": 3},
    "memory": ["last_topic"],
    "blocks": [
        {"id": "search", "type": "knowledge", "name": "Search policies",
         "with": {"knowledge_base": "policies", "query": "{{input.topic}}", "top_k": 3}},
        {"id": "web", "type": "web_search", "with": {"queries": "{{input.topic}} news"}},
        {"id": "draft", "type": "llm", "name": "Draft", "description": "The first draft",
         "after": {"any": ["search", "web"]},
         "with": {"model": "openai/gpt-4o", "temperature": 0.2,
                  "system": "You write for {{vars.company}} in a {{input.tone}} tone.",
                  "prompt": "Topic: {{input.topic}}\nContext: {{search.results}}\n"
                            "News: {{web.context}}"}},
        {"id": "extract", "type": "llm", "after": ["draft"],
         "with": {"system": "Extract the parameters from the text. Find the score.",
                  "prompt": "{{draft.content}}", "model": "anthropic/claude-sonnet-4-5",
                  "output_schema": {"type": "object", "properties": {
                      "score": {"type": "number", "description": "The score"}},
                      "required": ["score"]}}},
        {"id": "gate", "type": "condition", "after": ["extract"],
         "with": {"cases": [{"when": "(extract.score >= 8) and (contains(draft.content, "
                                     "\"Acme\"))", "goto": "polish"}],
                  "default": "review"}},
        {"id": "polish", "type": "agent", "after": ["gate"],
         "with": {"prompt": "Polish: {{draft.content}}", "system": "Be brief.",
                  "model": "openai-compatible/ollama/llama3.2", "max_iterations": 3}},
        {"id": "review", "type": "template", "after": ["gate"],
         "with": {"template": "Needs review: {{ text }}",
                  "variables": {"text": "{{draft.content}}"}}},
        {"id": "joined", "type": "set", "after": {"any": ["polish", "review"]},
         "with": {"output": {"expr": "polish.content or review.output"}}},
        {"id": "fetch", "type": "http", "after": ["joined"],
         "with": {"url": "https://api.example.com/items?topic={{input.topic}}",
                  "method": "GET", "headers": {"Accept": "application/json"}}},
        {"id": "items_each", "type": "parallel", "name": "Items (items)",
         "with": {"for_each": "{{fetch.data}}", "max_concurrency": 4},
         "blocks": [{"id": "shout", "type": "code", "with": {
             "language": "python", "source": "def main(item: str) -> dict:\n"
                                             "    return {'upper': item.upper()}\n",
             "inputs": {"item": "{{loop.item}}"}, "outputs": {"upper": "string"}}}]},
        {"id": "items", "type": "set", "name": "Items", "after": ["fetch"],
         "with": {"output": {"expr": "pluck(pluck(items_each.results, 'shout'), 'upper')"}}},
        {"id": "remember", "type": "set", "after": ["items"],
         "with": {"last_topic": "{{input.topic}}"}},
        {"id": "classify", "type": "router", "after": ["remember"],
         "with": {"prompt": "Classify the text into one of: short; long.\nPick by length."
                            "\n\nText: {{draft.content}}",
                  "routes": {"done": {"description": "short"}, "more": {"description": "long"}},
                  "model": "google/gemini-2.5-flash"}},
        {"id": "done", "type": "response", "after": ["classify"],
         "with": {"data": {"answer": "{{joined.output}}"}, "message": "{{joined.output}}"}},
        {"id": "more", "type": "response", "after": ["classify"],
         "with": {"data": {"answer": "{{joined.output}}", "items": "{{items.output}}"}}},
    ],
    "metadata": {"layout": LAYOUT},
}

CHAT = {
    "version": 1, "id": "kind-chat", "name": "Kind chat",
    "inputs": {"query": {"type": "string", "description": "The chat message"},
               "conversation": {"type": "string", "default": "default",
                                "description": "The conversation (its history is kept per "
                                               "user)"}},
    "memory": ["topic"],
    "blocks": [
        {"id": "reply", "type": "agent", "with": {
            "model": "openai/gpt-4o", "system": "Be kind. The last topic: {{memory.topic}}",
            "prompt": "{{input.query}}", "conversation": "{{input.conversation}}",
            "memory_window": 5}},
        {"id": "save", "type": "set", "after": ["reply"], "with": {"topic": "{{reply.content}}"}},
        {"id": "say", "type": "response", "after": ["save"],
         "with": {"message": "You said {{input.query}}: {{reply.content}}"}},
    ],
    "metadata": {"layout": {"reply": {"x": 300, "y": 100}, "save": {"x": 600, "y": 100},
                            "say": {"x": 900, "y": 100}}},
}


@pytest.mark.parametrize("document", [WRITTEN, CHAT], ids=["workflow", "chatflow"])
def test_a_hand_written_document_comes_back_the_same(document):
    flowforge.load(document)                                 # a valid flowforge document
    again = _again(document)
    assert _without_origin(again) == document
    assert _again(again) == again                            # and stays so


def test_the_dify_app_reads_as_dify_writes_it():
    app = export_dify(WRITTEN)
    assert app["kind"] == "app" and app["app"]["mode"] == "workflow"
    assert app["app"]["name"] == "Research desk"
    nodes = {node["id"]: node for node in app["workflow"]["graph"]["nodes"]}
    start = nodes["start"]["data"]
    assert start["type"] == "start"
    assert [(v["variable"], v["type"], v["required"]) for v in start["variables"]] == [
        ("topic", "text-input", True), ("tone", "select", True), ("depth", "number", False)]
    draft = nodes["draft"]["data"]
    assert draft["type"] == "llm" and draft["title"] == "Draft"
    assert draft["model"] == {"provider": "openai", "name": "gpt-4o", "mode": "chat",
                              "completion_params": {"temperature": 0.2}}
    assert draft["prompt_template"][1]["text"] == (
        "Topic: {{#start.topic#}}\nContext: {{#search.result#}}\nNews: {{#web.text#}}")
    assert draft["prompt_template"][0]["text"] == \
        "You write for {{#env.company#}} in a {{#start.tone#}} tone."
    assert nodes["polish"]["data"]["agent_parameters"]["model"]["value"]["provider"] == "ollama"
    assert nodes["extract"]["data"]["type"] == "parameter-extractor"
    assert nodes["items"]["data"]["type"] == "iteration"
    assert nodes["shout"]["parentId"] == "items"
    assert nodes["shout"]["data"]["variables"] == [{"variable": "item",
                                                    "value_selector": ["items", "item"]}]
    assert nodes["remember"]["data"]["items"][0]["variable_selector"] == \
        ["conversation", "last_topic"]
    assert nodes["gate"]["data"]["cases"][0]["conditions"][1] == {
        "variable_selector": ["draft", "text"], "comparison_operator": "contains",
        "value": "Acme", "varType": "string"}
    assert nodes["fetch"]["position"] == {"x": 800, "y": 320}
    edges = {(e["source"], e["sourceHandle"], e["target"])
             for e in app["workflow"]["graph"]["edges"]}
    assert {("start", "source", "search"), ("gate", "true", "polish"),
            ("gate", "false", "review"), ("classify", "1", "done"),
            ("classify", "2", "more"), ("itemsstart", "source", "shout")} <= edges
    assert app["workflow"]["environment_variables"][1]["value_type"] == "number"


def test_a_written_condition_comes_back_in_dify_s_spelling_and_stays_so():
    document = copy.deepcopy(WRITTEN)
    document["blocks"][4]["with"]["cases"][0]["when"] = "extract.score >= 8"
    again = _again(document)
    assert again["blocks"][4]["with"]["cases"][0]["when"] == "(extract.score >= 8)"
    assert _again(again) == again


def test_blocks_without_a_dify_counterpart_refuse_the_export_with_the_list():
    document = {"version": 1, "id": "x", "memory": [], "blocks": [
        {"id": "twice", "type": "loop", "with": {"times": 2}, "blocks": []},
        {"id": "grade", "type": "evaluator", "with": {"content": "hi", "metrics": []}},
        {"id": "calc", "type": "set", "with": {"label": "run {{input.name}}"}},
        {"id": "ask", "type": "llm", "retry": 3, "with": {"prompt": "hi", "tools": []}},
        {"id": "say", "type": "response", "with": {"message": "{{env.HOME}}"}}]}
    with pytest.raises(ExportRefused) as refused:
        export_dify(document)
    text = str(refused.value)
    assert "nothing was written" in text
    for line in ["twice: the `loop` block type has no Dify counterpart",
                 "grade: the `evaluator` block type has no Dify counterpart: use an llm block",
                 "calc: `label`: a set block exports as Dify's variable assigner",
                 "ask: `retry` has no Dify counterpart",
                 "ask: `tools` has no place on Dify's llm node",
                 "say: `{{env.HOME}}` has no Dify counterpart"]:
        assert line in text, text


def test_a_partly_imported_file_is_refused_naming_its_unsupported_blocks():
    document = import_file(CORPUS / "MCP.yml", partial=True).document
    with pytest.raises(ExportRefused, match="the `unsupported` block type has no Dify counterpart"):
        export_dify(document)
