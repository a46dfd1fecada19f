"""Knowledge bases belong to a user (issue 17): through a workflow, user b
cannot read, search, add to or delete user a's base (it answers like a base
that does not exist), a shared base is read by both, keyword indexes are per
user, and the local user's bases (made before ownership) stay where they were.
On SQLite and on PostgreSQL."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import flowforge
from flowforge.errors import NotFound, ToolError
from flowforge.knowledge.scoped import UserKnowledge
from flowforge.knowledge.tool import knowledge_search_tool
from tests.knowledge.conftest import POLICIES


def _search(base: str) -> dict:
    return {"id": "ask", "blocks": [{"id": "search", "type": "knowledge", "with": {
        "knowledge_base": base, "query": "refund", "top_k": 2}}]}


async def _run(kb, document, user):
    return await flowforge.run(document, storage=False, user=user,
                               services={"knowledge": kb})


async def test_a_users_base_is_invisible_to_others(kb, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("Alice's refund notes: only for alice.")
    built = await _run(kb, {"id": "build", "blocks": [{"id": "search", "type": "knowledge",
                       "with": {"knowledge_base": "notes", "query": "refund",
                                "sources": [str(notes)]}}]}, "alice")
    assert built.status == "succeeded", built.error
    assert (await _run(kb, _search("notes"), "alice")).status == "succeeded"

    bob = await _run(kb, _search("notes"), "bob")
    assert bob.status == "failed"
    assert "no knowledge base named 'notes'" in bob.blocks["search"].error
    assert "alice" not in bob.blocks["search"].error          # not even the owner leaks

    bobs = UserKnowledge(kb, "bob")
    for attempt in (bobs.get("notes"), bobs.documents("notes"), bobs.search("notes", "x")):
        with pytest.raises(NotFound):
            await attempt
    assert await bobs.delete("notes") is False                 # deletes only his own
    with pytest.raises(NotFound) as caught:                     # adding does not create,
        await bobs.add_text("notes", "Bob's own notes.", document_name="b")
    assert "alice" not in str(caught.value)                     # and names nothing of alice's
    assert [b.name for b in await bobs.list()] == []
    await bobs.create("notes")
    await bobs.add_text("notes", "Bob's own notes about refunds.", document_name="b")
    alices = UserKnowledge(kb, "alice")
    assert [d.name for d in await alices.documents("notes")] == ["a"]
    assert [d.name for d in await bobs.documents("notes")] == ["b"]

    tool = knowledge_search_tool(knowledge_base="notes")
    context = SimpleNamespace(user={"id": "carol"}, services={"knowledge": kb})
    with pytest.raises(ToolError, match="no knowledge base named 'notes'"):
        await tool.execute({"query": "refund"}, SimpleNamespace(block_context=context))


async def test_shared_bases_are_read_by_everyone_and_written_by_admins(kb):
    await kb.create("faq", stored_as="shared/faq")
    await kb.add_paths("shared/faq", [POLICIES])
    for user in ("alice", "bob"):
        result = await _run(kb, _search("faq"), user)
        assert result.status == "succeeded" and result.results["search"]["totalResults"] > 0
    with pytest.raises(Exception, match="administrator"):
        await UserKnowledge(kb, "alice").create("faq2", shared=True)


async def test_the_local_users_bases_stay_theirs(kb):
    await kb.create("policies")                                 # as before ownership
    await kb.add_paths("policies", [POLICIES])
    assert (await _run(kb, _search("policies"), None)).status == "succeeded"   # CLI user
    assert (await _run(kb, _search("policies"), "alice")).status == "failed"


async def test_keyword_indexes_are_per_user(kb):
    alice, bob = UserKnowledge(kb, "alice"), UserKnowledge(kb, "bob")
    await alice.index_keywords(["refund", "warranty"], "can I get a refund?", "r1")
    assert (await alice.lookup(["refund"]))["queries"]
    assert not (await bob.lookup(["refund"]))["queries"]


async def test_shared_slash_name_reads_the_shared_base_and_nothing_else(kb):
    """`shared/NAME` names the shared base explicitly (the research
    orchestrator's `web_source: shared/web`); it never reaches another
    owner's base and cannot be written through."""
    await kb.create("web", stored_as="shared/web")
    await kb.add_paths("shared/web", [POLICIES])
    await kb.create("private", stored_as="bob/private")
    alice = UserKnowledge(kb, "alice")
    assert (await alice.get("shared/web")).name == "web"
    found = await alice.search("shared/web", "refund")
    assert found["totalResults"] > 0
    with pytest.raises(Exception, match="no shared knowledge base named 'private'"):
        await alice.search("shared/private", "refund")
    with pytest.raises(Exception, match="invalid knowledge base name"):
        await alice.search("shared/../bob/private", "refund")
    with pytest.raises(Exception, match="invalid knowledge base name"):
        await alice.create("shared/other")
