"""Registry CRUD and versions: what a user adding and changing blocks relies on."""

from __future__ import annotations

import pytest

from flowforge.errors import NotFound, ValidationFailed
from flowforge.registry import Registry

DOUBLE = {
    "id": "double_it", "name": "Double", "description": "Doubles a number.",
    "execution_type": "python", "use_when": "a number must be multiplied by two",
    "tags": ["math"],
    "input_schema": {"type": "object", "properties": {"x": {"type": "number"}},
                     "required": ["x"]},
    "output_schema": {"type": "object", "properties": {"y": {"type": "number"}},
                      "required": ["y"]},
    "source_code": "async def execute(inputs, context):\n    return {'y': inputs['x'] * 2}\n",
    "examples": [{"inputs": {"x": 2}, "outputs": {"y": 4}}],
}


@pytest.fixture(params=["sqlite", "postgres"])
def registry_url(request, tmp_path) -> str:
    """Every test here runs on both back ends of the registry."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return request.getfixturevalue("postgres_schema_url")


async def test_a_fresh_registry_holds_the_starter_library(registry):
    ids = await registry.ids()
    assert {"text_word_count", "llm_summarise", "http_fetch", "date_diff"} <= set(ids)
    assert await registry.seed_library() == []     # already there: nothing re-added


async def test_add_get_and_versions(registry):
    first = await registry.add(DOUBLE)
    assert first.version == 1 and first.metadata.created_by == "user"
    assert (await registry.add(DOUBLE)).version == 1  # identical: no new version
    changed = await registry.add({**DOUBLE, "description": "Multiplies a number by two."})
    assert changed.version == 2
    assert (await registry.get("double_it")).description == "Multiplies a number by two."
    assert (await registry.get("double_it", 1)).description == "Doubles a number."
    assert [v["version"] for v in await registry.versions("double_it")] == [1, 2]
    assert "inputs['x'] * 2" in await registry.source("double_it")


async def test_delete_hides_the_block_but_keeps_its_history(registry):
    await registry.add(DOUBLE)
    await registry.delete("double_it")
    assert await registry.find("double_it") is None
    assert "double_it" not in await registry.ids()
    assert (await registry.get("double_it", 1)).id == "double_it"
    with pytest.raises(NotFound):
        await registry.delete("double_it")


async def test_unknown_id_suggests_the_closest(registry):
    with pytest.raises(NotFound, match="did you mean 'math_stats'"):
        await registry.get("math_stat")


async def test_the_registry_persists_in_its_database(registry_url):
    url = registry_url
    first = Registry.open(url, search="text")
    await first.add(DOUBLE)
    first.close()
    again = Registry.open(url, search="text")
    assert (await again.get("double_it")).version == 1
    again.close()


@pytest.mark.parametrize("change, where, words", [
    ({"input_schema": {"type": "array"}}, "input_schema.type", "must be 'object'"),
    ({"input_schema": {"type": "object", "properties": {"x": {"type": "nope"}}}},
     "input_schema", "not a valid JSON Schema"),
    ({"source_code": "def execute(inputs, context):\n    return {}\n"}, "source_code",
     "async def execute"),
    ({"source_code": "import os\nasync def execute(inputs, context):\n    return {}\n"},
     "source_code", "module 'os' is not allowed"),
    ({"examples": [{"inputs": {"x": "two"}, "outputs": {}}]}, "examples[0].inputs",
     "'two' is not of type 'number'"),
    ({"execution_type": "llm", "source_code": None, "prompt_template": "Double {y}"},
     "prompt_template", "placeholder '{y}' is not an input"),
    ({"id": "Bad Id"}, "id", "String should match pattern"),
    ({"category": "sink"}, "category", "Input should be"),
])
async def test_invalid_definitions_are_refused_with_the_place_and_the_reason(registry, change,
                                                                              where, words):
    with pytest.raises(ValidationFailed) as info:
        await registry.add({**DOUBLE, **change})
    text = str(info.value)
    assert where in text and words in text


async def test_servers_on_one_postgresql_database_share_one_registry(postgres_schema_url,
                                                                    monkeypatch):
    # With FLOWFORGE_DATABASE_URL on PostgreSQL (several server processes or hosts),
    # the registry lives there too: a block one server adds, another one finds.
    monkeypatch.setenv("FLOWFORGE_DATABASE_URL", postgres_schema_url)
    monkeypatch.delenv("FLOWFORGE_REGISTRY_URL", raising=False)
    one = Registry.open(search="text")
    other = Registry.open(search="text")
    try:
        await one.add(DOUBLE)
        assert (await other.get("double_it")).version == 1
        await other.delete("double_it")
        assert await one.find("double_it") is None
    finally:
        one.close()
        other.close()


def test_a_seed_block_definition_with_a_numeric_tier_loads():
    """The seed's block definitions write `metadata.tier: 2`; the tier is kept as text."""
    from flowforge.registry.model import BlockDefinition

    definition = BlockDefinition.model_validate({**DOUBLE, "metadata": {"tier": 2}})
    assert definition.metadata.tier == "2"


async def test_the_store_is_async_and_document_checks_read_what_was_just_written(registry):
    """Async like the other stores, on both back ends; PostgreSQL never makes the
    event loop wait on the network; the compiler's sync reads (`Registry.now`)
    see a block the moment it is added, so a workflow using it validates."""
    import inspect
    import threading

    import flowforge

    assert all(inspect.iscoroutinefunction(getattr(registry.store, name)) for name in
               ("put", "get", "ids", "versions", "delete", "keys", "text_search"))
    answered_on = await registry.store.call(threading.get_ident)
    on_the_loop = answered_on == threading.get_ident()
    assert on_the_loop == registry.store.location.startswith(("/", ":memory:"))
    document = {"id": "uses-new", "blocks": [{"id": "d", "uses": "double_it",
                                                "with": {"x": 2}}]}
    with pytest.raises(flowforge.ValidationFailed, match="no block 'double_it'"):
        flowforge.load(document)
    await registry.add(DOUBLE)
    assert registry.now.find("double_it").version == 1 and "double_it" in registry.now.ids()
    flowforge.load(document)
