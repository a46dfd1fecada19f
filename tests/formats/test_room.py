"""The formats room: broken files are named, unsupported nodes refuse the
import unless a partial one is asked for."""

from __future__ import annotations

import pytest

from flowforge.formats import FormatError, Imported, ImportRefused, ImportReport, NodeReport, \
    import_data, read_foreign, room


class _Toy:
    name = "toy"
    title = "Toy flows"

    def detect(self, data):
        return isinstance(data, dict) and "toy" in data

    def convert(self, data, *, source):
        report = ImportReport("toy", [NodeReport("a", "Ask", "llm", "llm"),
                                      NodeReport("m", "Mail", "gmail", None, "use an http block")])
        return Imported({"version": 1, "id": "t", "blocks": []}, report)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(room, "formats", lambda: [_Toy()])


def test_glued_json_is_named_with_its_place(tmp_path):
    path = tmp_path / "two.json"
    path.write_text('{"nodes": []}\n{"nodes": []}\n')
    with pytest.raises(FormatError, match="two JSON documents glued together: the second "
                                          "starts at line 2, column 1"):
        read_foreign(path)


def test_missing_file_and_bad_yaml_are_named(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        read_foreign(tmp_path / "nope.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(FormatError, match=r"bad\.yml: invalid YAML at line"):
        read_foreign(bad)


def test_unsupported_nodes_refuse_unless_partial(toy):
    with pytest.raises(ImportRefused) as refused:
        import_data({"toy": 1}, source="f.json")
    text = str(refused.value)
    assert "1 node(s)" in text and "'Mail' (m, gmail): no counterpart; use an http block" in text
    imported = import_data({"toy": 1}, source="f.json", partial=True)
    assert [node.id for node in imported.report.unsupported] == ["m"]


def test_unknown_data_and_unknown_format_name(toy):
    with pytest.raises(FormatError, match="not a workflow of a format flowforge imports "
                                          r"\(Toy flows\)"):
        import_data({"other": 1})
    with pytest.raises(FormatError, match="unknown format 'dify'; known: toy"):
        import_data({"toy": 1}, format="dify")
