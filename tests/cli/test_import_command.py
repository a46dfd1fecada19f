"""`flowforge import FILE [-o OUT] [--format NAME] [--partial]`: the room picks
the format, the document goes to stdout or OUT once it validates, the report to
stderr; a file it cannot import is exit 2 with one line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flowforge.cli.main import app
from flowforge.formats import ImportReport, Imported, NodeReport, room

from tests.apps.chains_receiver import EXAMPLES

MOVIE = EXAMPLES / "movie_script.json"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


class _Toy:
    """A foreign format for the test: `mail: true` adds a node without a
    counterpart, `broken: true` a document that does not validate."""

    name = "toy"
    title = "Toy flows"

    def detect(self, data):
        return isinstance(data, dict) and "toy" in data

    def convert(self, data, *, source):
        nodes = [NodeReport("ask", "Ask", "question", "set", dropped=["color: no colours"])]
        blocks = [{"id": "ask", "type": "set",
                   "with": {"v": "{{nowhere.x}}" if data.get("broken") else data["toy"]}}]
        if data.get("mail"):
            nodes.append(NodeReport("mail", "Send mail", "gmail", None, "use an http block"))
        report = ImportReport("toy", nodes, knowledge_bases=["handbook"])
        return Imported({"version": 1, "id": "toy", "blocks": blocks}, report)


@pytest.fixture
def toy(monkeypatch):
    known = room.formats()
    monkeypatch.setattr(room, "formats", lambda: [_Toy(), *known])


def test_an_agent_file_goes_to_stdout_and_the_report_to_stderr():
    result = invoke("import", MOVIE, "--base-url", "http://127.0.0.1:1")
    assert result.exit_code == 0, result.output
    document = yaml.safe_load(result.stdout)
    assert [b["id"] for b in document["blocks"]] == [
        "plots", "summary", "characters", "parse_characters", "send_result"]
    assert "agent: 5 of 5 node(s) converted" in result.stderr
    assert "'parse characters' (parse_characters, parser) -> parser" in result.stderr
    assert "converted" not in result.stdout


def test_the_report_names_dropped_settings_and_bases_and_json_output(toy, tmp_path):
    source = tmp_path / "flow.yaml"
    source.write_text("toy: 3\n")
    target = tmp_path / "out.json"
    result = invoke("import", source, "-o", target)
    assert result.exit_code == 0, result.output
    assert json.loads(target.read_text())["blocks"][0]["with"] == {"v": 3}
    assert "dropped color: no colours" in result.stderr
    assert "knowledge bases to create (the file carries no documents): handbook" in \
        result.stderr
    assert f"wrote {target}" in result.stderr and result.stdout == ""


def test_nodes_without_a_counterpart_refuse_unless_partial(toy, tmp_path):
    source = tmp_path / "flow.json"
    source.write_text(json.dumps({"toy": 1, "mail": True}))
    target = tmp_path / "out.yaml"
    refused = invoke("import", source, "-o", target)
    assert refused.exit_code == 2 and not target.exists()
    first, *rest = refused.stderr.strip().splitlines()
    assert first.startswith("error: ") and "1 node(s) of this toy file have no flowforge " \
        "counterpart; nothing was written (pass --partial" in first
    assert rest == ["  ✗ 'Send mail' (mail, gmail): no counterpart; use an http block"]
    partial = invoke("import", source, "-o", target, "--partial")
    assert partial.exit_code == 0, partial.output
    assert "toy: 1 of 2 node(s) converted" in partial.stderr
    assert "✗ 'Send mail' (mail, gmail): no counterpart" in partial.stderr


def test_a_document_that_does_not_validate_is_not_written(toy, tmp_path):
    source = tmp_path / "flow.json"
    source.write_text(json.dumps({"toy": 1, "broken": True}))
    target = tmp_path / "out.yaml"
    result = invoke("import", source, "-o", target)
    assert result.exit_code == 2 and not target.exists()
    assert "(as imported)" in result.stderr and "blocks[0].with.v" in result.stderr
    assert "nowhere" in result.stderr


@pytest.mark.parametrize("name, text, says", [
    ("missing.json", None, "missing.json: no such file"),
    ("bad.yaml", "a: [1, 2\n", "bad.yaml: invalid YAML at line"),
    ("glued.json", '{"nodes": []}\n{"nodes": []}\n',
     "glued.json: two JSON documents glued together: the second starts at line 2, column 1"),
    ("untyped.json", json.dumps({"variables": {}, "promptChain": [{"name": "Ask"}]}),
     "promptChain[0] 'Ask': `type` is required"),
    ("other.json", json.dumps({"hello": "world"}),
     "other.json: not a workflow of a format flowforge imports"),
    ("native.yaml", "id: x\nblocks: [{id: a, type: set, with: {}}]\n",
     "native.yaml: is already a flowforge document"),
])
def test_a_file_it_cannot_import_is_exit_2_and_one_line(tmp_path, name, text, says):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    result = invoke("import", path)
    assert result.exit_code == 2, result.output
    assert says in result.stderr, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.output
    assert result.stdout == ""


def test_a_named_format_is_used_and_an_unknown_one_is_named():
    result = invoke("import", MOVIE, "--format", "pipeline")
    assert result.exit_code == 2 and "nodes" in result.stderr      # read as a Pipeline: broken
    unknown = invoke("import", MOVIE, "--format", "zapier")
    assert unknown.exit_code == 2
    assert "unknown format 'zapier'; known: pipeline, agent" in unknown.stderr


DIFY = Path(__file__).parents[1] / "formats" / "corpus" / "dify" / "SEO_Slug_Generator.yml"


def test_export_to_dify_writes_yaml_that_imports_back_the_same(tmp_path):
    document = tmp_path / "app.yaml"
    assert invoke("import", DIFY, "-o", document).exit_code == 0
    exported = tmp_path / "app.yml"
    result = invoke("export", document, "--format", "dify", "-o", exported)
    assert result.exit_code == 0, result.output
    app = yaml.safe_load(exported.read_text())
    assert app["kind"] == "app" and app["app"]["mode"] == "workflow"
    again = tmp_path / "again.yaml"
    assert invoke("import", exported, "-o", again).exit_code == 0
    assert yaml.safe_load(again.read_text()) == yaml.safe_load(document.read_text())
    to_stdout = invoke("export", document, "--format", "dify")
    assert to_stdout.exit_code == 0 and yaml.safe_load(to_stdout.stdout)["kind"] == "app"


def test_export_to_dify_refuses_blocks_without_a_counterpart_exit_2(tmp_path):
    document = tmp_path / "flow.yaml"
    document.write_text("id: x\nblocks:\n  - {id: grade, type: evaluator, with: {content: hi, "
                        "metrics: [{name: A, description: a, range: [0, 10]}]}}\n"
                        "  - {id: say, type: response, with: {message: '{{grade.a}}'}}\n")
    target = tmp_path / "out.yml"
    result = invoke("export", document, "--format", "dify", "-o", target)
    assert result.exit_code == 2 and not target.exists()
    assert "Traceback" not in result.output and result.stdout == ""
    first, *rest = result.stderr.strip().splitlines()
    assert first.startswith("error: ") and "cannot be exported to Dify" in first
    assert rest == ["  ✗ grade: the `evaluator` block type has no Dify counterpart: use an "
                    "llm block with an output schema"]
