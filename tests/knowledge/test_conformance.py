"""One suite, both back ends (SQLite + in-memory index, PostgreSQL + pgvector):
what a user of knowledge bases relies on, with the real offline embedding model."""

from __future__ import annotations

import pytest

from flowforge.errors import FlowforgeError, NotFound
from tests.knowledge.conftest import POLICIES


async def test_create_list_delete(kb):
    await kb.create("policies", description="company policies")
    await kb.create("faq")
    assert [b.name for b in await kb.list()] == ["faq", "policies"]
    base = await kb.get("policies")
    assert (base.embedding_model, base.dimensions, base.description) == (
        "local/all-minilm-l6-v2", 384, "company policies")
    with pytest.raises(FlowforgeError, match="already exists"):
        await kb.create("faq")
    assert await kb.delete("faq") is True
    assert await kb.delete("faq") is False
    with pytest.raises(NotFound, match="kb create faq"):
        await kb.search("faq", "anything")


async def test_policies_folder_is_ingested_with_tags_and_searchable(kb):
    await kb.create("policies")
    report = await kb.add_paths("policies", [POLICIES], tags={"source": "handbook"})
    assert len(report.added) == 8 and report.chunks >= 8
    docs = {d.name: d for d in await kb.documents("policies")}
    assert docs["Refund Policy"].tags == {"category": ["policies"], "source": ["handbook"],
                                          "topic": ["payments", "refunds"]}
    assert docs["Cookie Policy"].tags["category"] == ["legal"]       # from manifest.yaml
    found = await kb.search("policies", "Can I get a refund on an order I placed three weeks ago?",
                            top_k=3)
    assert found["results"][0]["documentName"] == "Refund Policy"
    assert found["totalResults"] == 3 and found["query"].startswith("Can I get")
    hit = found["results"][0]
    assert set(hit) == {"documentId", "documentName", "content", "chunkIndex", "similarity",
                        "metadata"}
    assert {"tags", "chunkId", "createdAt"} <= set(hit["metadata"])
    assert found["context"] == "\n\n---\n\n".join(r["content"] for r in found["results"])
    assert found["cost"] == {"input": 0.0, "output": 0.0, "total": 0.0}


async def test_re_adding_unchanged_is_a_no_op_and_changed_replaces_chunks(kb):
    await kb.create("notes")
    first = await kb.add_text("notes", "Parcels to Norway take nine days.", document_name="ship")
    assert first.added == ["ship"]
    again = await kb.add_text("notes", "Parcels to Norway take nine days.", document_name="ship")
    assert again.unchanged == ["ship"] and again.embedded == 0
    changed = await kb.add_text("notes", "Parcels to Iceland take twelve days.",
                                document_name="ship")
    assert changed.updated == ["ship"]
    docs = await kb.documents("notes")
    assert len(docs) == 1 and docs[0].chunks == 1
    text = await kb.search("notes", "Norway", mode="text")
    assert text["results"] == []                       # the old chunk is gone from FTS
    vector = await kb.search("notes", "shipping time to Iceland", mode="vector")
    assert [r["content"] for r in vector["results"]] == ["Parcels to Iceland take twelve days."]


async def test_deleting_a_document_removes_its_chunks_and_vectors(kb):
    await kb.create("notes")
    await kb.add_text("notes", "The office cat is called Biscuit.", document_name="cat")
    await kb.add_text("notes", "Invoices are due within fourteen days.", document_name="invoices")
    assert await kb.remove("notes", "cat") == 1
    assert await kb.remove("notes", "cat") == 0
    for mode in ("vector", "text", "hybrid"):
        found = await kb.search("notes", "what is the cat called", mode=mode, top_k=5)
        assert all(r["documentName"] != "cat" for r in found["results"]), mode
    assert (await kb.get("notes")).chunks == 1


async def test_removing_documents_by_id_removes_exactly_those(kb):
    """An id is not also a name: removing document 1 leaves a document named "1"."""
    await kb.create("notes")
    await kb.add_text("notes", "The office cat is called Biscuit.", document_name="cat")
    (cat,) = await kb.documents("notes")
    await kb.add_text("notes", "Invoices are due within fourteen days.",
                      document_name=str(cat.id))
    assert await kb.remove_documents("notes", [cat.id]) == 1
    assert [d.name for d in await kb.documents("notes")] == [str(cat.id)]
    assert await kb.remove_documents("notes", [cat.id]) == 0


def _corpus():
    """40 refund notes tagged team=billing, 6 unrelated notes tagged team=garden."""
    billing = [(f"billing-{i}", f"Refund request {i}: the customer wants their money back "
                f"for order {1000 + i}.", {"team": "billing", "region": "eu" if i % 2 else "us"})
               for i in range(40)]
    garden = [(f"garden-{i}", f"Garden note {i}: water the tomatoes and prune the roses.",
               {"team": "garden", "region": "eu"}) for i in range(6)]
    return billing + garden


async def _fill(kb):
    await kb.create("mixed")
    for name, text, tags in _corpus():
        await kb.add_text("mixed", text, document_name=name, tags=tags)


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
async def test_filters_apply_inside_the_search(kb, mode):
    """The nearest chunks all belong to team=billing; filtering on garden must
    still return top_k garden chunks, not an empty post-filtered list."""
    await _fill(kb)
    query = "refund money back garden tomatoes"
    found = await kb.search("mixed", query, top_k=5, filters={"team": "garden"}, mode=mode)
    assert found["totalResults"] == 5
    assert all(r["metadata"]["tags"]["team"] == ["garden"] for r in found["results"])


async def test_filter_values_are_ored_and_tags_are_anded(kb):
    await _fill(kb)
    both = await kb.search("mixed", "refund", top_k=50, filters={"team": ["billing", "garden"]})
    assert {r["metadata"]["tags"]["team"][0] for r in both["results"]} == {"billing", "garden"}
    anded = await kb.search("mixed", "refund", top_k=50, filters={"team": "billing", "region": "us"})
    assert anded["totalResults"] == 20
    assert all(r["metadata"]["tags"] == {"team": ["billing"], "region": ["us"]}
               for r in anded["results"])



async def test_sim_filter_spellings_and_filters_that_never_match(kb):
    """Sim's `a|OR|b` and `[{tagName, tagValue}]` mean any of; a filter no document
    can match is an error naming what the base has, never a silent empty list."""
    await _fill(kb)
    for spelled in ({"team": "billing|OR|garden"}, {"team": ["billing|OR|garden"]},
                    [{"tagName": "team", "tagValue": "billing"},
                     {"tagName": "team", "tagValue": "garden"}]):
        both = await kb.search("mixed", "refund", top_k=50, filters=spelled)
        assert {r["metadata"]["tags"]["team"][0] for r in both["results"]} == \
            {"billing", "garden"}, spelled
    only = await kb.search("mixed", "refund", top_k=50,
                           filters=[{"tagName": "team", "tagValue": "garden"}])
    assert only["totalResults"] == 6
    with pytest.raises(FlowforgeError, match=r"filters.team: no document of knowledge base "
                                             r"'mixed' has team = marketing \(its values: "
                                             r"billing, garden\)"):
        await kb.search("mixed", "refund", filters={"team": "marketing"})
    with pytest.raises(FlowforgeError, match=r"filters.category: no document of knowledge "
                                             r"base 'mixed' has the tag 'category' \(its "
                                             r"tags: region, team\)"):
        await kb.search("mixed", "refund", filters={"category": "policies|OR|legal"})
    with pytest.raises(FlowforgeError, match=r"filters: no document of knowledge base 'mixed' "
                                             r"has all of team = garden; region = us together"):
        await kb.search("mixed", "refund", filters={"team": "garden", "region": "us"})
    with pytest.raises(FlowforgeError, match=r"filters\[0\]: write a filter as"):
        await kb.search("mixed", "refund", filters=[{"name": "team"}])


async def test_modes_and_min_similarity(kb):
    await kb.create("notes")
    await kb.add_text("notes", "Our warranty lasts two years against manufacturing defects.",
                      document_name="warranty")
    await kb.add_text("notes", "Standard delivery to Canada takes five to seven business days.",
                      document_name="shipping")
    query = "how long is the guarantee on products"
    vector = await kb.search("notes", query, mode="vector", top_k=2)
    assert vector["results"][0]["documentName"] == "warranty"
    assert vector["results"][0]["similarity"] > vector["results"][1]["similarity"]
    assert (await kb.search("notes", query, mode="text"))["results"] == []   # no shared words
    text = await kb.search("notes", "Canada delivery", mode="text")
    assert [r["documentName"] for r in text["results"]] == ["shipping"]
    assert 0 < text["results"][0]["similarity"] < 1
    hybrid = await kb.search("notes", "warranty for defects", mode="hybrid", top_k=2)
    assert hybrid["results"][0]["documentName"] == "warranty"
    strict = await kb.search("notes", query, mode="vector", top_k=2,
                             min_similarity=vector["results"][0]["similarity"] - 1e-4)
    assert [r["documentName"] for r in strict["results"]] == ["warranty"]
    with pytest.raises(FlowforgeError, match="unknown search mode"):
        await kb.search("notes", query, mode="fuzzy")


async def test_querying_with_another_embedding_model_is_an_error(kb):
    await kb.create("notes")
    with pytest.raises(FlowforgeError, match="built with local/all-minilm-l6-v2"):
        await kb.search("notes", "x", model="openai/text-embedding-3-small")


async def test_jsonl_lines_become_documents_with_their_tags(kb, tmp_path):
    lines = tmp_path / "faq.jsonl"
    lines.write_text('{"text": "Gift cards never expire.", "metadata": {"name": "gift", '
                     '"tags": {"topic": "cards"}}}\n\n'
                     '{"text": "Exchanges are free.", "metadata": {}}\n')
    await kb.create("faq")
    report = await kb.add_paths("faq", [lines])
    assert sorted(report.added) == ["faq#3", "gift"]
    found = await kb.search("faq", "do gift cards expire", top_k=1, filters={"topic": "cards"})
    assert found["results"][0]["documentName"] == "gift"


async def test_keyword_index(kb):
    first = await kb.index_keywords(["Refund Policy", "refund  policy", " ", "x", "the", "a" * 51,
                                     "Shipping"], "Can I get a refund?", "answer-1")
    assert first["indexed"] == ["refund policy", "shipping"]
    assert [r["reason"] for r in first["rejected"]] == [
        "blank", "shorter than 2 characters", "a stop word", "longer than 50 characters"]
    await kb.index_keywords(["REFUND POLICY"], "Refund after 30 days?", "answer-2")
    found = await kb.lookup(["refund policy", "unknown"])
    entry = found["keywords"]["refund policy"]
    assert entry["keyword"] == "Refund Policy"          # first written form kept
    assert entry["queries"] == ["Can I get a refund?", "Refund after 30 days?"]
    assert entry["results"] == ["answer-1", "answer-2"]
    assert found["missing"] == ["unknown"]
    other = await kb.lookup(["refund policy"], namespace="elsewhere")
    assert other["keywords"] == {}


@pytest.mark.parametrize("mode", ["vector", "text", "hybrid"])
async def test_results_come_best_first_by_the_score_they_report(kb, mode):
    """Hybrid fusion chooses the chunks, but the list is shown sorted by the
    `similarity` each result reports (issue 26: 0.54, 0.51, 0.41, 0.47, 0.17)."""
    await _fill(kb)
    found = await kb.search("mixed", "refund money back for order 1007 tomatoes", top_k=10,
                            mode=mode)
    scores = [r["similarity"] for r in found["results"]]
    assert len(scores) == 10
    assert scores == sorted(scores, reverse=True), scores
