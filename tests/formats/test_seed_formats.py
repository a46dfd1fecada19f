"""Pipeline JSON and Agent JSON are formats of the room, and loading asks the
room (not each converter) about any document that is not a flowforge one."""

from __future__ import annotations

import json

import pytest

from flowforge.errors import WorkflowError
from flowforge.formats import ImportReport, Imported, NodeReport, detect, import_data, room
from flowforge.formats.agent_json import FORMAT as AGENT
from flowforge.formats.pipeline_json import FORMAT as PIPELINE
from flowforge.server.document_view import check_text
from flowforge.service.loading import load

AGENT_DATA = {"name": "Tides", "variables": {"topic": "tides", "key": ""}, "promptChain": [
    {"type": "prompt", "name": "Draft", "user": "About {topic}", "llm": "openai",
     "model": "gpt-4o", "apiKey": "{key}", "output": "draft"},
    {"type": "return", "name": "Done", "output": ["draft"]}]}
PIPELINE_DATA = {"id": "p", "nodes": [{"id": "n1", "block_id": "nope", "inputs": {}}],
                 "edges": []}


def test_the_room_knows_both_seed_formats_and_reports_each_node():
    assert detect(AGENT_DATA) is AGENT and detect(PIPELINE_DATA) is PIPELINE
    imported = import_data(AGENT_DATA, source="a.json")
    assert [(n.id, n.title, n.type, n.became) for n in imported.report.nodes] == [
        ("draft", "Draft", "prompt", "llm"), ("done", "Done", "return", "response")]
    assert any("key" in note and "secrets" in note for note in imported.report.notes)
    assert [b["type"] for b in imported.document["blocks"]] == ["llm", "response"]
    piped = import_data(PIPELINE_DATA)
    assert [(n.id, n.type, n.became) for n in piped.report.nodes] == [("n1", "nope", "registry")]
    assert piped.document["blocks"] == [{"id": "n1", "uses": "nope", "with": {}}]


def test_other_formats_with_nodes_are_not_taken_for_a_pipeline():
    n8n = {"name": "Flow", "nodes": [{"id": "1", "type": "n8n-nodes-base.set"}],
           "connections": {}}
    flowise = {"nodes": [{"id": "a", "data": {}}], "edges": [], "viewport": {}}
    assert not PIPELINE.detect(n8n) and not PIPELINE.detect(flowise)
    assert PIPELINE.detect({"nodes": [{"id": "n1", "block_id": "x"}], "extra": 1})


def test_options_reach_only_the_format_they_name(tmp_path):
    agent = {"variables": {}, "promptChain": [
        {"type": "event", "name": "Ping", "endPoint": "/hook", "method": "GET", "output": "r"},
        {"type": "return", "name": "Out", "output": ["r"]}]}
    imported = import_data(agent, options={"agent": {"base_url": "http://127.0.0.1:9"},
                                           "pipeline": {"nonsense": 1}})
    assert imported.document["blocks"][0]["with"]["url"] == "http://127.0.0.1:9/hook"


class _Toy:
    """A stand-in for a foreign format: `toy` data, one node without a counterpart
    when it says `mail`."""

    name = "toy"
    title = "Toy flows"

    def detect(self, data):
        return isinstance(data, dict) and "toy" in data

    def convert(self, data, *, source):
        nodes = [NodeReport("a", "A", "thing", "set")]
        if data.get("mail"):
            nodes.append(NodeReport("m", "Mail", "gmail", None, "use an http block"))
        document = {"version": 1, "id": "from-toy",
                    "blocks": [{"id": "a", "type": "set", "with": {"v": data["toy"]}}]}
        return Imported(document, ImportReport("toy", nodes))


@pytest.fixture
def toy(monkeypatch):
    known = room.formats()
    monkeypatch.setattr(room, "formats", lambda: [_Toy(), *known])


def test_loading_asks_the_room_for_a_dict_and_a_file(toy, tmp_path):
    assert load({"toy": 3}).id == "from-toy"
    path = tmp_path / "flow.yaml"
    path.write_text("toy: 4\n")
    assert load(path).doc.blocks[0].with_ == {"v": 4}
    path.write_text(json.dumps(AGENT_DATA))        # the seed formats the same way
    assert load(path).id == "tides"


def test_loading_refuses_nodes_without_a_counterpart_with_their_list(toy):
    with pytest.raises(WorkflowError) as refused:
        load({"toy": 1, "mail": True})
    assert "'Mail' (m, gmail): no counterpart; use an http block" in str(refused.value)
    assert "--partial" in str(refused.value)


def test_a_flowforge_document_never_asks_the_room(monkeypatch):
    def asked():
        raise AssertionError("the room was asked about a flowforge document")

    monkeypatch.setattr(room, "formats", asked)
    assert load({"id": "n", "blocks": [{"id": "a", "type": "set", "with": {}}]}).id == "n"


def test_the_editor_s_check_asks_the_room_too(toy):
    problems, compiled = check_text("toy: 5\n")
    assert problems == [] and compiled.id == "from-toy"
    problems, compiled = check_text("toy: 5\nmail: true\n")
    assert compiled is None and "no counterpart" in problems[0]["message"]
