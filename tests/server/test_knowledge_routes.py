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
