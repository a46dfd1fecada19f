"""Block ids per user (issue 23): the registry keys a block by (owner, id), so
two users hold the same id without either learning of the other, a user's
block shadows a shared one, and every block stored before the change is
still there after the migration - on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import time

import pytest

from flowforge.errors import NotFound
from flowforge.registry import Registry, registry_for
from flowforge.registry import block_store_from_url
from flowforge.registry import store_sqlite as sqlite_store
from flowforge.registry.owned import SharedBlock


@pytest.fixture(params=["sqlite", "postgres"])
def registry_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return request.getfixturevalue("postgres_schema_url")


def _block(field: str, description: str) -> dict:
    return {"id": "same_id", "name": "Same", "description": description,
            "execution_type": "python", "tags": ["owners"],
            "input_schema": {"type": "object", "required": [field],
                             "properties": {field: {"type": "string"}}},
            "source_code": f"async def execute(inputs, context):\n"
                           f"    return {{'got': inputs['{field}']}}\n"}


async def test_two_users_hold_the_same_id_each_their_own(registry):
    alice, bob = registry_for(registry, "alice"), registry_for(registry, "bob")
    await alice.add(_block("apple", "Alice's apples, counted carefully"))
    assert await bob.find("same_id") is None                # bob sees nothing of alice's
    await bob.add(_block("banana", "Bob's bananas, weighed"))
    assert (await alice.get("same_id")).input_schema["required"] == ["apple"]
    assert (await bob.get("same_id")).input_schema["required"] == ["banana"]
    assert (await alice.get("same_id")).version == (await bob.get("same_id")).version == 1
    assert "same_id" in await alice.ids() and "same_id" in await bob.ids()
    assert await registry.find("same_id") is None           # the shared namespace: neither
    await bob.delete("same_id")
    assert await bob.find("same_id") is None
    assert (await alice.get("same_id")).description.startswith("Alice's")
    with pytest.raises(NotFound, match="no block 'same_id' in the registry"):
        await bob.delete("same_id")


async def test_a_users_block_shadows_a_shared_one_of_that_id(registry):
    shared = await registry.get("text_clean")
    alice = registry_for(registry, "alice")
    mine = await alice.add({**_block("apple", "Alice's own cleaner"), "id": "text_clean"})
    assert mine.version == 1
    assert (await alice.get("text_clean")).description == "Alice's own cleaner"
    assert await alice.shadows("text_clean") and not await registry.shadows("text_clean")
    assert await registry.get("text_clean") == shared        # everyone else: the shared one
    assert await registry_for(registry, "bob").get("text_clean") == shared
    assert (await alice.ids()).count("text_clean") == 1
    with pytest.raises(SharedBlock, match="only an administrator"):
        await alice.delete("text_word_count")
    await alice.delete("text_clean")                         # hers gone, the shared one back
    assert await alice.get("text_clean") == shared


async def test_search_finds_a_users_own_block_and_never_anothers(registry):
    alice = registry_for(registry, "alice")
    await alice.add(_block("apple", "Counts ripe zucchini in a garden"))
    found = await registry_for(registry, "alice").search("zucchini garden", limit=3)
    assert [hit.definition.id for hit in found] == ["same_id"]
    assert await registry_for(registry, "bob").search("zucchini garden", limit=3) == []
    assert await registry.search("zucchini garden", limit=3) == []


# -- the migration keeps every stored block ------------------------------------------

def _old_registry(url: str, monkeypatch) -> None:
    """A registry as it was before block ids were per user (migration 0001 only),
    holding a shared block, a user's block, a user's block with two versions and
    a deleted one: rows written as the old code wrote them."""
    from flowforge.registry import store_postgres

    monkeypatch.setattr(sqlite_store, "REGISTRY_MIGRATIONS",
                        sqlite_store.REGISTRY_MIGRATIONS[:1])
    monkeypatch.setattr(store_postgres, "POSTGRES_REGISTRY_MIGRATIONS",
                        store_postgres.POSTGRES_REGISTRY_MIGRATIONS[:1])
    store = block_store_from_url(url).tables
    rows = [("old_shared", None, 1, "Shared since long ago", False),
            ("alices_tool", "alice", 1, "Alice's first tool", False),
            ("alices_tool", "alice", 2, "Alice's tool, improved", False),
            ("bobs_gone", "bob", 1, "Bob deleted this one", True)]
    now = time.time()
    for block_id, owner, version, description, deleted in rows:
        definition = {**_block("x", description), "id": block_id,
                      "metadata": {"created_by": "user", "tier": "community",
                                   **({"owner": owner} if owner else {})}}
        store._change("INSERT INTO registry_versions VALUES (?, ?, ?, ?, ?)",
                      (block_id, version, json.dumps(definition), now, "user"))
        store._change("DELETE FROM registry_heads WHERE id = ?", (block_id,))
        store._change("INSERT INTO registry_heads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (block_id, version, "Same", "process", "python", "user", "community",
                       now, int(deleted)))
        if deleted:
            continue
        store._change("DELETE FROM registry_fts WHERE id = ?", (block_id,))
        if url.startswith("sqlite"):
            store._change("INSERT INTO registry_fts VALUES (?, ?, ?, ?, ?)",
                          (block_id, "Same", description, "", "owners"))
        else:
            store._change("INSERT INTO registry_fts VALUES (?, to_tsvector('english', ?))",
                          (block_id, f"Same {description} owners"))
    store.close()
    monkeypatch.undo()


async def test_the_migration_keeps_every_stored_block(registry_url, monkeypatch):
    _old_registry(registry_url, monkeypatch)
    monkeypatch.setenv("FLOWFORGE_REGISTRY_SEARCH", "text")
    registry = Registry.open(registry_url)
    try:
        alice, bob = registry_for(registry, "alice"), registry_for(registry, "bob")
        assert (await registry.get("old_shared")).description == "Shared since long ago"
        assert (await alice.get("old_shared")).description == "Shared since long ago"
        assert (await alice.get("alices_tool")).description == "Alice's tool, improved"
        assert (await alice.get("alices_tool", 1)).description == "Alice's first tool"
        assert [v["version"] for v in await alice.versions("alices_tool")] == [1, 2]
        assert await bob.find("alices_tool") is None
        assert await registry.find("alices_tool") is None
        assert await bob.find("bobs_gone") is None
        assert (await bob.get("bobs_gone", 1)).id == "bobs_gone"
        found = await alice.search("improved tool", limit=3)
        assert [hit.definition.id for hit in found] == ["alices_tool"]
        assert await bob.search("improved tool", limit=3) == []
        # bob may now hold alice's id, and the next version of hers is 3
        assert (await bob.add({**_block("y", "Bob's own"), "id": "alices_tool"})).version == 1
        third = await alice.add({**_block("x", "Alice's third"), "id": "alices_tool"})
        assert third.version == 3
        assert "text_word_count" in await registry.ids()         # the library seeded on top
    finally:
        registry.close()
    reopened = Registry.open(registry_url, seed=False)           # the migration runs once
    try:
        assert (await registry_for(reopened, "alice").get("alices_tool")).version == 3
    finally:
        reopened.close()


def test_blocks_show_says_when_a_users_block_shadows_a_shared_one(registry):
    import asyncio

    from typer.testing import CliRunner

    from flowforge.cli.blocks import blocks_app

    asyncio.run(registry_for(registry, "alice").add({**_block("apple", "Alice's cleaner"),
                                                     "id": "text_clean"}))
    runner = CliRunner()
    shared = runner.invoke(blocks_app, ["show", "text_clean", "--json"])
    assert shared.exit_code == 0 and json.loads(shared.stdout)["metadata"]["created_by"] == \
        "library"
    hers = runner.invoke(blocks_app, ["show", "text_clean", "--owner", "alice", "--json"])
    assert hers.exit_code == 0, hers.output
    assert json.loads(hers.stdout)["description"] == "Alice's cleaner"
    assert "shadows the shared block" in hers.stderr
    bobs = runner.invoke(blocks_app, ["show", "text_clean", "--owner", "bob", "--json"])
    assert json.loads(bobs.stdout)["metadata"]["created_by"] == "library"
    assert "shadows" not in bobs.stderr
