"""`flowforge kb ...` as a user types it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flowforge.cli.main import app
from tests.knowledge.conftest import POLICIES


@pytest.fixture
def kb_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{tmp_path / 'knowledge.db'}")
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["kb", *args])


def test_create_add_search_list_remove(kb_cli):
    assert kb_cli("create", "policies").exit_code == 0
    added = kb_cli("add", "policies", str(POLICIES), "--tag", "source=handbook")
    assert added.exit_code == 0, added.output
    assert "8 added" in added.output
    again = kb_cli("add", "policies", str(POLICIES), "--tag", "source=handbook")
    assert "8 unchanged" in again.output

    found = kb_cli("search", "policies", "Can I return a gift card?", "--top-k", "2",
                   "--tag", "category=policies,legal", "--tag", "source=handbook", "--json")
    assert found.exit_code == 0, found.output
    result = json.loads(found.output)
    assert result["totalResults"] == 2
    assert result["results"][0]["documentName"] in {"Loyalty Programme and Gift Cards",
                                                    "Returns and Exchanges"}
    text = kb_cli("search", "policies", "express delivery Canada", "--mode", "text")
    assert "Shipping Policy" in text.output

    listed = kb_cli("list", "--json")
    assert [(b["name"], b["documents"]) for b in json.loads(listed.output)] == [("policies", 8)]
    removed = kb_cli("remove", "policies", "--document", "Cookie Policy")
    assert removed.exit_code == 0 and "removed 1 document" in removed.output
    assert kb_cli("remove", "policies").exit_code == 0
    assert "no knowledge bases" in kb_cli("list").output


def test_bad_input_exits_2_with_a_message(kb_cli, tmp_path):
    missing = kb_cli("search", "nope", "query")       # not found: 1, as everywhere (issue 15)
    assert missing.exit_code == 1 and "kb create nope" in missing.output
    kb_cli("create", "policies")
    bad_tag = kb_cli("add", "policies", str(POLICIES), "--tag", "category")
    assert bad_tag.exit_code == 2 and "key=value" in bad_tag.output
    bad_file = tmp_path / "x.docx"
    bad_file.write_text("x")
    unsupported = kb_cli("add", "policies", str(bad_file))
    assert unsupported.exit_code == 2 and "unsupported file type" in unsupported.output
    assert kb_cli("search", "policies", "x", "--mode", "fuzzy").exit_code == 2
    assert "Traceback" not in unsupported.output


def test_remove_takes_the_document_as_kb_docs_shows_it(kb_cli, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text("Refunds are paid within 30 days.\n")
    (folder / "Report [draft].txt").write_text("Quarterly numbers, not final.\n")
    (folder / "shipping.txt").write_text("Parcels arrive in three days.\n")
    assert kb_cli("create", "notes").exit_code == 0
    assert kb_cli("add", "notes", str(folder)).exit_code == 0
    shown = kb_cli("docs", "notes").output
    assert "Report [draft]" in shown                     # not eaten as markup
    by_shown_name = kb_cli("remove", "notes", "Report [draft]")
    assert by_shown_name.exit_code == 0, by_shown_name.output
    assert "removed 1 document(s) from 'notes': Report [draft]" in by_shown_name.output
    by_file_name = kb_cli("remove", "notes", "refunds.md")
    assert by_file_name.exit_code == 0 and "refunds" in by_file_name.output
    typo = kb_cli("remove", "notes", "shiping")
    assert typo.exit_code == 1 and "did you mean 'shipping'?" in typo.output
    both = kb_cli("remove", "notes", "shipping", "--document", "other")
    assert both.exit_code == 2 and "name one" in both.output
    left = json.loads(kb_cli("docs", "notes", "--json").output)
    assert [d["name"] for d in left] == ["shipping"]
    assert kb_cli("remove", "notes", "--document", "SHIPPING").exit_code == 0
    assert json.loads(kb_cli("docs", "notes", "--json").output) == []


def test_remove_by_id_removes_that_document_only(kb_cli, tmp_path):
    """`kb docs` shows each document's id first; `kb remove BASE ID` removes that
    one, not also a document whose name or file name is the same digits."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text("Refunds are paid within 30 days.\n")
    assert kb_cli("create", "notes").exit_code == 0
    assert kb_cli("add", "notes", str(folder / "refunds.md")).exit_code == 0
    (refunds,) = json.loads(kb_cli("docs", "notes", "--json").output)
    (folder / f"{refunds['id']}.txt").write_text("Chapter two of the handbook.\n")
    assert kb_cli("add", "notes", str(folder / f"{refunds['id']}.txt")).exit_code == 0
    removed = kb_cli("remove", "notes", str(refunds["id"]))
    assert removed.exit_code == 0, removed.output
    assert "removed 1 document(s) from 'notes': refunds" in removed.output
    left = json.loads(kb_cli("docs", "notes", "--json").output)
    assert [d["name"] for d in left] == [str(refunds["id"])]
