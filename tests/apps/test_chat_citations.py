"""The RAG chat's citations are true (issue 26): every source of an answer is
one the conversation's tools returned, or the answer goes back to the model
with the real sources and is then refused; `used_internal_kb` and
`used_external_kb` follow what was really used; "I don't know" is a possible
answer; the knowledge base comes before the web; and what the model sends is
cleaned of control characters and scripts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowforge.blocks._rag_tools import RagState, build_rag_tool, clean_answer, clean_text
from flowforge.errors import ToolError
from flowforge.service.chat import ChatError
from tests.apps.helpers import call
from tests.apps.test_chat import WARRANTY_ANSWER, chat, kb_search, respond, tool_results

WEB_URL = "https://consumer-rights.example.eu/right-of-withdrawal"


async def test_a_source_no_tool_returned_is_sent_back_then_refused(plan, knowledge,
                                                                  storage_url):
    model, script = plan(kb_search(), respond(sources=["The answer is 10 years."]),
                         respond(sources=["Warranty", "Lifetime Guarantee Handbook"]))
    with pytest.raises(ChatError) as caught:
        await chat("How long is the warranty?", model, knowledge, storage_url)
    # Refused by the answer tool's schema, narrowed to what the search returned
    # (so the model reads the real sources in the refusal).
    first = tool_results(script.seen[2])[-1].content
    assert "'The answer is 10 years.' is not one of" in first
    assert "'Warranty'" in first                 # the real sources, to choose from
    assert "'generate_response' failed 2 time(s)" in str(caught.value) or \
        "rejected" in str(caught.value)
    assert "'Lifetime Guarantee Handbook' is not one of" in str(caught.value)


async def test_citing_a_document_of_an_empty_base_is_refused(plan, knowledge, storage_url):
    await knowledge.create("empty", exist_ok=True)
    model, script = plan(call("knowledge_base_search", query="warranty period", kb_id="empty"),
                         respond(), respond())
    with pytest.raises(ChatError) as caught:
        await ask_empty(model, knowledge, storage_url)
    assert "'Warranty' was not returned by any tool" in str(caught.value)
    assert "none (no tool has returned a source yet)" in str(caught.value)


async def ask_empty(model, knowledge, storage_url):
    from flowforge.service.chat import ask
    return await ask("How long is the warranty?", kb="empty", model=model,
                     storage=storage_url, services={"knowledge": knowledge})


async def test_i_dont_know_is_a_possible_answer(plan, knowledge, storage_url):
    model, _ = plan(kb_search("moon base opening hours"),
                    respond(answer="Neither the knowledge base nor the web says when the "
                                   "moon base opens.", sources=[], used_internal_kb=False,
                            used_external_kb=False, confidence_score=0.2))
    answer = await chat("When does the moon base open?", model, knowledge, storage_url)
    assert answer.sources == [] and answer.answer.startswith("Neither")
    assert not answer.used_internal_kb and not answer.used_external_kb


async def test_the_flags_follow_the_verified_sources_not_the_claim(plan, knowledge,
                                                                  storage_url):
    model, _ = plan(kb_search(), respond(used_external_kb=True))   # claims the web: never searched
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    assert answer.used_internal_kb and not answer.used_external_kb
    assert [s["kind"] for s in answer.sources] == ["kb"]


async def test_a_claim_of_using_the_base_needs_a_source(plan, knowledge, storage_url):
    model, script = plan(kb_search(), respond(sources=[]), respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    refused = tool_results(script.seen[2])[-1].content
    assert "`sources` is empty but used_internal_kb is true" in refused
    assert answer.sources[0]["title"] == "Warranty"


async def test_web_search_before_the_knowledge_base_is_refused(plan, knowledge, storage_url):
    model, script = plan(call("web_search", query="warranty law"), kb_search(), respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    refused = tool_results(script.seen[1])[-1].content
    assert "ERROR: You did not call knowledge_base_search first" in refused
    assert "citations" not in refused            # the web was not searched
    assert answer.tool_calls == ["web_search", "knowledge_base_search", "generate_response"]
    assert not answer.used_external_kb


async def test_skipping_a_mandatory_tool_gets_the_seeds_error_wording(plan, knowledge,
                                                                     storage_url):
    model, script = plan({"reply": "Two years."}, kb_search(), respond())
    await chat("How long is the warranty?", model, knowledge, storage_url)
    assert script.seen[1][-1].content.startswith(
        "ERROR: You did not call 'knowledge_base_search'")


async def test_queries_and_answers_are_cleaned(plan, knowledge, storage_url):
    model, script = plan(kb_search("warr\x00anty\u202e per\u200biod"),
                         respond(answer="Two\x00 years.<script>alert(1)</script> \u202eEnjoy."))
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    searched = json.loads(tool_results(script.seen[1])[-1].content)
    assert searched["query"] == "warranty period"
    assert answer.answer == "Two years. Enjoy."
    assert "\x00" not in answer.formatted_response and "<script" not in answer.formatted_response


def test_cleaning_keeps_ordinary_text():
    text = "Prices: 5 < 7 and tabs\tand\nnew lines, é, 日本, emoji 🙂"
    assert clean_text(text) == text and clean_answer(text) == text.strip()


# -- the citation rule as a property, at the tool itself ---------------------------------
KB_HITS = {"Warranty": "doc-1", "Refund Policy": "doc-2"}
WEB_PAGES = {WEB_URL: "Right of withdrawal"}
REAL = set(KB_HITS) | set(KB_HITS.values()) | set(WEB_PAGES) | set(WEB_PAGES.values())


def _tool():
    shared: dict = {}
    state = RagState.of(shared)
    for title, doc in KB_HITS.items():
        meta = {"document_id": doc, "title": title}
        state.kb[title] = state.kb[doc] = meta
    for url, title in WEB_PAGES.items():
        page = {"url": url, "title": title}
        state.web[url] = page
        state.web.setdefault(title, page)
    state.kb_searched = True
    state.last_web = {"query": "q"}
    return build_rag_tool("final_response", {}, name=None, description=None, parameters=None,
                          context=None, shared=shared)


_source = st.one_of(
    st.sampled_from(sorted(REAL)),
    st.text(min_size=1, max_size=30),
    st.fixed_dictionaries({}, optional={"title": st.sampled_from(sorted(REAL)) | st.text(max_size=20),
                                        "url": st.sampled_from(sorted(WEB_PAGES)) | st.text(max_size=20),
                                        "document_id": st.sampled_from(sorted(KB_HITS.values()))
                                        | st.text(max_size=20),
                                        "kind": st.sampled_from(["kb", "web"])}))


@settings(max_examples=300, deadline=None)
@given(sources=st.lists(_source, max_size=5), internal=st.booleans(), external=st.booleans())
async def test_every_returned_source_is_one_the_tools_returned(sources, internal, external):
    tool = _tool()
    arguments = {**WARRANTY_ANSWER, "sources": sources, "used_internal_kb": internal,
                 "used_external_kb": external}
    try:
        result = await tool.execute(arguments, None)
    except ToolError:
        return                                   # refused: nothing is cited
    cited = result["metadata"]["sources"]
    for source in cited:
        if source["kind"] == "kb":
            assert KB_HITS.get(source["title"]) == source["document_id"]
        else:
            assert source["url"] in WEB_PAGES
    assert result["used_internal_kb"] == any(s["kind"] == "kb" for s in cited)
    assert result["used_external_kb"] == any(s["kind"] == "web" for s in cited)


# -- the seed's clients and prompts, unchanged ------------------------------------------
async def test_the_seeds_tool_names_arguments_and_answers(plan, knowledge, storage_url,
                                                          monkeypatch):
    """`perplexity_search` (FLOWFORGE_CHAT_WEB_TOOL), `index_keywords` with the
    seed's `{keywords, query, perplexity_result_id}` answering `{indexed: true,
    keyword_count, merged}`, `merged: true` for a keyword an earlier question
    indexed, and `confidence` for `confidence_score`."""
    monkeypatch.setenv("FLOWFORGE_CHAT_WEB_TOOL", "perplexity_search")
    keywords = ["seed withdrawal window", "seed cooling-off rule", "seed EU directive"]

    def turn(question):
        return plan(
            kb_search("refund period withdrawal"),
            call("perplexity_search", query="EU right of withdrawal online purchase"),
            call("index_keywords", keywords=keywords, query=question,
                 perplexity_result_id="pplx-1"),
            call("generate_response", answer="EU law gives 14 days.",
                 sources=[WEB_URL], confidence=0.7, used_internal_kb=False,
                 used_external_kb=True))

    model, script = turn("What does EU law say about withdrawal?")
    answer = await chat("What does EU law say about withdrawal?", model, knowledge,
                        storage_url, web_source="web")
    assert "perplexity_search" in script.tools_seen[1]
    assert "web_search" not in script.tools_seen[1]
    assert answer.tool_calls == ["knowledge_base_search", "perplexity_search",
                                 "index_keywords", "generate_response"]
    first = json.loads(tool_results(script.seen[3])[-1].content)
    assert (first["indexed"], first["keyword_count"], first["merged"]) == (True, 3, False)
    assert answer.confidence_score == 0.7 and answer.used_external_kb

    model, script = turn("And for a sale item?")
    await chat("And for a sale item?", model, knowledge, storage_url, web_source="web")
    again = json.loads(tool_results(script.seen[3])[-1].content)
    assert again["merged"] is True and again["already_known"] == keywords



async def test_after_a_search_the_answer_tool_accepts_only_the_sources_found(
        plan, knowledge, storage_url):
    """A model whose output follows the schema (the local model's grammar does)
    cannot cite anything but what the tools returned."""
    seen_schemas: list = []
    limits: list = []
    model, script = plan(kb_search(), respond())
    original = script.__call__

    def watching(messages, tools):
        answer = next((t for t in tools or [] if t.name == "generate_response"), None)
        sources = answer.parameters["properties"]["sources"] if answer else None
        seen_schemas.append(sources["items"] if answer else None)
        limits.append(sources["maxItems"] if answer else None)
        return original(messages, tools)
    script.__call__ = watching                       # type: ignore[method-assign]
    from flowforge.providers.scripted import register_script
    register_script(model.split("/", 1)[1], watching)
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    assert "enum" not in seen_schemas[0]             # nothing found yet: the general form
    searched = json.loads(tool_results(script.seen[1])[-1].content)
    titles = {meta["title"] for meta in searched["metadata"]}
    assert set(seen_schemas[1]["enum"]) == titles and "Warranty" in titles
    # each source at most once: the 0.5B model listed one title 16 times up to maxItems 20
    assert limits[1] == len(seen_schemas[1]["enum"]) < 20
    assert answer.sources[0]["title"] == "Warranty"
