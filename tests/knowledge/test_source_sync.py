"""A `knowledge` block's `sources:` make its base mirror them, wherever the
project lives: the same workflow run from a second clone (or after the folder
moved) finds the documents it already stored instead of adding every one
again; a file deleted from a synced folder leaves the base; documents added
to the same base by other means stay.  On SQLite and on PostgreSQL."""

from __future__ import annotations

import shutil
from pathlib import Path

import flowforge
from flowforge.knowledge.ingest import load_path
from tests.knowledge.conftest import POLICIES

QUESTION = "Can I get a refund on an order I placed three weeks ago?"

WORKFLOW = """\
id: support-sync
inputs: {query: {type: string}}
blocks:
  - id: search
    type: knowledge
    with: {knowledge_base: policies, sources: [policies], query: "{{input.query}}", top_k: 2}
"""


def _clone(where: Path) -> Path:
    """A project folder: `policies/` beside the workflow file that names it."""
    where.mkdir(parents=True)
    shutil.copytree(POLICIES, where / "policies")
    (where / "support.yaml").write_text(WORKFLOW)
    return where / "support.yaml"


async def _ask(kb, workflow: Path, query: str = QUESTION):
    result = await flowforge.run(workflow, {"query": query}, storage=False,
                                 services={"knowledge": kb})
    assert result.status == "succeeded", result.blocks
    return result


def _sync_report(result) -> dict:
    [event] = [e for e in result.events if e["type"] == "progress" and "report" in e]
    return event


async def test_a_second_clone_finds_the_documents_already_stored(kb, tmp_path):
    first = await _ask(kb, _clone(tmp_path / "alice" / "project"))
    count = len(await kb.documents("policies"))
    assert count == len(load_path(POLICIES))

    second = await _ask(kb, _clone(tmp_path / "bob" / "checkout"))
    assert len(await kb.documents("policies")) == count           # no second copy
    assert _sync_report(second)["report"]["unchanged"] and \
        not _sync_report(second)["report"]["added"]
    found = second.results["search"]["results"]
    contents = [r["content"] for r in found]
    assert len(set(contents)) == len(contents) == 2                # not the same passage twice
    assert [r["documentName"] for r in found] == \
        [r["documentName"] for r in first.results["search"]["results"]]


async def test_a_moved_folder_keeps_its_documents_and_embeds_nothing(kb, tmp_path):
    workflow = _clone(tmp_path / "old")
    await _ask(kb, workflow)
    ids = {d.source: d.id for d in await kb.documents("policies")}
    moved = tmp_path / "elsewhere" / "new"
    moved.parent.mkdir()
    shutil.move(tmp_path / "old", moved)
    report = _sync_report(await _ask(kb, moved / "support.yaml"))["report"]
    assert report["embedded"] == 0 and not report["added"] and not report["removed"]
    assert {d.source: d.id for d in await kb.documents("policies")} == ids
    assert "policies/refunds.md" in ids                            # named as the workflow does


async def test_a_deleted_file_leaves_the_base_and_other_documents_stay(kb, tmp_path):
    workflow = _clone(tmp_path / "project")
    await _ask(kb, workflow)
    await kb.add_text("policies", "Gift cards never expire.", document_name="gift cards")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "hours.md").write_text("The shop opens at nine.")
    await kb.add_paths("policies", [extra])                       # `flowforge kb add`
    (workflow.parent / "policies" / "refunds.md").unlink()
    result = await _ask(kb, workflow)
    event = _sync_report(result)
    assert event["report"]["removed"] == ["Refund Policy"]
    assert "1 removed" in event["message"]
    names = {d.name for d in await kb.documents("policies")}
    assert "Refund Policy" not in names and {"gift cards", "hours", "Privacy Policy"} <= names
    assert all(r["documentName"] != "Refund Policy" for r in result.results["search"]["results"])
    assert event["report"]["undeclared"] == []          # a file of a declared source: no warning
    assert not [e for e in result.events if e["type"] == "warning"]


async def test_a_workflow_syncing_the_base_from_other_sources_says_what_it_undid(kb, tmp_path):
    project = tmp_path / "project"
    support = _clone(project)
    (project / "faq").mkdir()
    (project / "faq" / "hours.md").write_text("# Opening hours\n\nThe shop opens at nine.\n")
    other = project / "faq.yaml"
    other.write_text(WORKFLOW.replace("id: support-sync", "id: faq-sync")
                     .replace("sources: [policies]", "sources: [faq]"))
    await _ask(kb, support)
    result = await _ask(kb, other, "When do you open?")
    assert _sync_report(result)["report"]["undeclared"] == ["policies"]
    [warning] = [e for e in result.events if e["type"] == "warning"]
    assert warning["block_id"] == "search"
    assert "knowledge base 'policies': removed the documents synced from policies, which " \
           "this block's `sources:` do not declare" in warning["message"]
    assert "give each workflow a knowledge base of its own" in warning["message"]
    assert {d.name for d in await kb.documents("policies")} == {"hours"}


async def test_a_base_synced_by_absolute_paths_migrates_without_duplicates(kb, tmp_path):
    """Two clones synced under the old rule (each file known by its absolute path:
    what `kb add` still does) left two copies of every document."""
    one, two = _clone(tmp_path / "one"), _clone(tmp_path / "two")
    await kb.create("policies")
    for clone in (one, two):
        await kb.add_paths("policies", [clone.parent / "policies"])
    await kb.add_text("policies", "Gift cards never expire.", document_name="gift cards")
    changed = two.parent / "policies" / "shipping.md"
    changed.write_text(changed.read_text() + "\nParcels to Iceland take twelve days.\n")

    result = await _ask(kb, two)
    report = _sync_report(result)["report"]
    assert not report["added"] and report["updated"] == ["Shipping Policy"]
    assert report["embedded"] <= 2                                # the changed chunk or two
    docs = await kb.documents("policies")
    assert {d.source for d in docs if d.synced} == {
        f"policies/{p.name}" for p in POLICIES.iterdir() if p.suffix in (".md", ".html")}
    contents = [r["content"] for r in result.results["search"]["results"]]
    assert len(set(contents)) == len(contents) == 2
    # the first clone's shipping.md differs from the second's, so it may be another
    # document: it stays until a sync from the first clone, where it is that file
    [left] = [d for d in docs if not d.synced and d.name != "gift cards"]
    assert left.source == str((one.parent / "policies" / "shipping.md").resolve())

    again = _sync_report(await _ask(kb, one))["report"]
    assert again["updated"] == ["Shipping Policy"] and not again["added"]
    assert again["removed"] == ["Shipping Policy"]                # the first clone's old copy
    docs = await kb.documents("policies")
    assert len(docs) == len(load_path(POLICIES)) + 1              # one copy each, and gift cards
    assert [d.name for d in docs if not d.synced] == ["gift cards"]


async def test_a_changed_file_synced_by_absolute_path_is_updated_in_place(kb, tmp_path):
    workflow = _clone(tmp_path / "project")
    await kb.create("policies")
    await kb.add_paths("policies", [workflow.parent / "policies"])   # the old rule's sources
    refunds = workflow.parent / "policies" / "refunds.md"
    refunds.write_text(refunds.read_text().replace("30 days", "45 days"))
    report = _sync_report(await _ask(kb, workflow))["report"]
    assert report["updated"] == ["Refund Policy"] and not report["added"] + report["removed"]
    docs = await kb.documents("policies")
    assert len(docs) == len(load_path(POLICIES)) and all(d.synced for d in docs)


async def test_kb_add_of_a_synced_folder_stores_nothing_twice(kb, tmp_path):
    """The guide's `flowforge kb add policies examples/policies` beside the demo's
    `sources: [policies]`: both name the same files (one identity before synced
    documents were known by their path inside the source; kept so)."""
    workflow = _clone(tmp_path / "project")
    await _ask(kb, workflow)
    count = len(await kb.documents("policies"))
    report = await kb.add_paths("policies", [workflow.parent / "policies"])
    assert len(report.unchanged) == count and not report.added
    assert len(await kb.documents("policies")) == count


async def test_the_chats_folder_is_synced_by_the_same_rule(kb, tmp_path):
    from flowforge.apps.chat.session import knowledge_base_for

    services = {"knowledge": kb}
    for clone in ("one", "two"):
        folder = tmp_path / clone / "policies"
        shutil.copytree(POLICIES, folder)
        assert await knowledge_base_for(str(folder), user=None, services=services) == "policies"
    docs = await kb.documents("policies")
    assert len(docs) == len(load_path(POLICIES))
    assert "policies/refunds.md" in {d.source for d in docs}
    (folder / "refunds.md").unlink()
    await knowledge_base_for(str(folder), user=None, services=services)
    assert len(await kb.documents("policies")) == len(docs) - 1


async def test_the_offline_webs_folder_is_synced_by_the_same_rule(kb, tmp_path):
    from flowforge.websearch import OfflineSearch

    long_page = "url: https://example.org/tents\n# Tents\n\n" + "".join(
        f"Paragraph {n}: pitch the tent with its back to the wind and stake every corner. "
        for n in range(60)) + "\n\nThe last word on tents: bring spare pegs.\n"
    for clone in ("one", "two"):
        folder = tmp_path / clone / "pages"
        folder.mkdir(parents=True)
        (folder / "tents.md").write_text(long_page)
        found = (await OfflineSearch(kb, folder=folder).search("spare pegs", max_results=1)
                 ).to_dict()
        # the passage is not the page's first: its address comes from the stored page
        assert found["citations"][0]["url"] == "https://example.org/tents"
    [doc] = await kb.documents("web-pages")
    assert doc.source == "pages/tents.md" and doc.chunks > 1
