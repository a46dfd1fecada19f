"""Knowledge bases over HTTP (the web app's knowledge page): each user's own
bases and the shared ones, documents added as text with tags, a search that
shows scores and tags; another user's base is not found, a shared one is
read-only."""

from __future__ import annotations

import pytest

from tests.apps.conftest import knowledge, knowledge_path  # noqa: F401 - fixtures
from tests.server.conftest import start_server

NOTE = ("# Returns of opened electronics\n\nOpened electronics can be returned within 14 days "
        "if every accessory is in the box. A restocking fee of 10 percent applies.")


@pytest.fixture
async def kb_server(tmp_path, knowledge, knowledge_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{knowledge_path}")
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    yield live
    await stop()


async def test_own_and_shared_bases_documents_and_search(kb_server):
    async with kb_server.client("alice") as alice, kb_server.client("bob") as bob:
        listed = (await alice.get("/api/knowledge")).json()["knowledge_bases"]
        shared = {b["name"]: b for b in listed}
        assert shared["policies"]["shared"] is True and shared["policies"]["documents"] > 0

        created = await alice.post("/api/knowledge", json={"name": "notes"})
        assert created.status_code == 201 and created.json()["shared"] is False
        again = await alice.post("/api/knowledge", json={"name": "notes"})
        assert again.status_code == 409 and "already have" in again.json()["error"]["message"]
        bad = await alice.post("/api/knowledge", json={"name": "a/b"})
        assert bad.status_code == 422

        added = await alice.post("/api/knowledge/notes/documents", json={
            "name": "electronics.md", "text": NOTE, "tags": {"category": ["returns"]}})
        assert added.status_code == 201, added.text
        assert added.json()["added"] == ["electronics.md"] and added.json()["chunks"] >= 1
        [document] = (await alice.get("/api/knowledge/notes/documents")).json()["documents"]
        assert document["name"] == "electronics.md"
        assert document["tags"] == {"category": ["returns"]}

        found = (await alice.post("/api/knowledge/notes/search",
                                  json={"query": "restocking fee for opened electronics"})).json()
        [hit] = found["results"]
        assert hit["documentName"] == "electronics.md" and hit["similarity"] > 0
        assert hit["metadata"]["tags"] == {"category": ["returns"]}
        policies = (await alice.post("/api/knowledge/policies/search",
                                     json={"query": "refund", "top_k": 2})).json()
        assert len(policies["results"]) == 2

        # bob sees neither alice's base nor its documents; nobody writes the shared space
        assert "notes" not in {b["name"] for b in
                               (await bob.get("/api/knowledge")).json()["knowledge_bases"]}
        assert (await bob.get("/api/knowledge/notes/documents")).status_code == 404
        assert (await bob.post("/api/knowledge/notes/search",
                               json={"query": "fee"})).status_code == 404
        shared_write = await alice.post("/api/knowledge/policies/documents",
                                        json={"name": "x.md", "text": "x"})
        assert shared_write.status_code == 404


async def test_a_bad_name_is_refused_in_words_not_as_a_pattern(kb_server):
    async with kb_server.client("alice") as alice:
        bad = await alice.post("/api/knowledge", json={"name": "a/b"})
    assert bad.status_code == 422
    message = bad.json()["error"]["message"]
    assert "'a/b' is not a usable name" in message and "without '/'" in message
    assert "pattern" not in message and "^" not in message


async def test_markdown_front_matter_becomes_tags_never_searched_text(kb_server):
    text = "---\ntitle: Opened electronics\ntags: {category: returns}\n---\n" + NOTE
    async with kb_server.client("alice") as alice:
        assert (await alice.post("/api/knowledge", json={"name": "notes"})).status_code == 201
        added = await alice.post("/api/knowledge/notes/documents", json={
            "name": "electronics.md", "text": text, "tags": {"team": ["support"]}})
        assert added.status_code == 201, added.text
        [document] = (await alice.get("/api/knowledge/notes/documents")).json()["documents"]
        found = (await alice.post("/api/knowledge/notes/search",
                                  json={"query": "opened electronics title tags"})).json()
    assert document["name"] == "electronics.md"
    assert document["tags"] == {"category": ["returns"], "team": ["support"]}
    assert found["results"] and all("---" not in hit["content"] and "title:" not in hit["content"]
                                    for hit in found["results"])


async def test_delete_a_document_and_a_base_of_ones_own_only(kb_server, gate_spy):
    async with kb_server.client("alice") as alice, kb_server.client("bob") as bob:
        assert (await alice.post("/api/knowledge", json={"name": "notes"})).status_code == 201
        for name in ("a.md", "b.md"):
            added = await alice.post("/api/knowledge/notes/documents",
                                     json={"name": name, "text": f"{name}: {NOTE}"})
            assert added.status_code == 201, added.text
        documents = (await alice.get("/api/knowledge/notes/documents")).json()["documents"]
        first = next(d for d in documents if d["name"] == "a.md")

        # bob can delete nothing of alice's: her base is not found for him
        assert (await bob.delete(f"/api/knowledge/notes/documents/{first['id']}")).status_code \
            == 404
        assert (await bob.delete("/api/knowledge/notes")).status_code == 404
        # the shared base is read-only here, even for the one who can see it
        shared = await alice.delete("/api/knowledge/policies")
        assert shared.status_code == 403 and "shared" in shared.json()["error"]["message"]
        # a folder's name meets the policy gate before the knowledge layer
        gate_spy.clear()
        dotted = await alice.delete("/api/knowledge/.notes")
        assert dotted.status_code == 403 and "server_files" in dotted.text, dotted.text
        assert ("check_kb_id", ".notes") in gate_spy

        gate_spy.clear()
        removed = await alice.delete(f"/api/knowledge/notes/documents/{first['id']}")
        assert removed.status_code == 204, removed.text
        assert ("check_kb_id", "notes") in gate_spy
        left = (await alice.get("/api/knowledge/notes/documents")).json()["documents"]
        assert [d["name"] for d in left] == ["b.md"]
        # an id is not a name: deleting document N leaves the document named "N"
        digits = str(left[0]["id"])
        named = await alice.post("/api/knowledge/notes/documents",
                                 json={"name": digits, "text": f"named: {NOTE}"})
        assert named.status_code == 201, named.text
        by_id = await alice.delete(f"/api/knowledge/notes/documents/{digits}")
        assert by_id.status_code == 204, by_id.text
        left = (await alice.get("/api/knowledge/notes/documents")).json()["documents"]
        assert [d["name"] for d in left] == [digits]
        again = await alice.delete(f"/api/knowledge/notes/documents/{first['id']}")
        assert again.status_code == 404 and "no document" in again.json()["error"]["message"]
        hits = (await alice.post("/api/knowledge/notes/search", json={"query": "a.md"})).json()
        assert all(hit["documentName"] != "a.md" for hit in hits["results"])

        assert (await alice.delete("/api/knowledge/notes")).status_code == 204
        names = {b["name"] for b in (await alice.get("/api/knowledge")).json()["knowledge_bases"]}
        assert "notes" not in names and "policies" in names
        assert (await alice.get("/api/knowledge/notes/documents")).status_code == 404


@pytest.fixture
def gate_spy(monkeypatch):
    """(check, value) for every knowledge-base id the policy gate decides on."""
    from flowforge.workflow.policy import Policy

    calls: list[tuple[str, object]] = []
    original = Policy.check_kb_id

    def spy(self, value, *args, **kwargs):
        calls.append(("check_kb_id", value))
        return original(self, value, *args, **kwargs)

    monkeypatch.setattr(Policy, "check_kb_id", spy)
    return calls
