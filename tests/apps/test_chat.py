"""The RAG chat's branches, each driven by a scripted model through the shipped
workflow: the rules users rely on (KB first, web only when needed, answer only
through generate_response, feedback then a clear error) and the sessions."""

from __future__ import annotations

import json

import pytest

from flowforge.service.chat import ChatError, ask, delete_session, get_session, list_sessions
from tests.apps.helpers import call

WARRANTY_ANSWER = dict(answer="Products carry a two-year warranty; Summit gear is lifetime.",
                       sources=["Warranty"], confidence_score=0.9, used_internal_kb=True,
                       used_external_kb=False)


def kb_search(query="warranty period"):
    return call("knowledge_base_search", query=query, kb_id="policies")


def respond(**fields):
    return call("generate_response", **{**WARRANTY_ANSWER, **fields})


def tool_results(messages):
    return [m for m in messages if m.role == "tool"]


async def chat(question, model, knowledge, storage_url, **options):
    return await ask(question, kb="policies", model=model, storage=storage_url,
                     services={"knowledge": knowledge}, **options)


async def test_kb_enough_answers_without_the_web(plan, knowledge, storage_url):
    model, script = plan(kb_search(), respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    assert answer.answer.startswith("Products carry a two-year warranty")
    assert answer.used_internal_kb and not answer.used_external_kb
    assert answer.tool_calls == ["knowledge_base_search", "generate_response"]
    assert answer.sources == [{"kind": "kb", "title": "Warranty",
                               "document_id": answer.sources[0]["document_id"]}]
    # the search the model asked for really ran on the policies base
    result = json.loads(tool_results(script.seen[1])[0].content)
    assert result["kb_id"] == "policies" and result["chunks"]
    assert any("Warranty" == meta["title"] for meta in result["metadata"])
    assert len(result["scores"]) == len(result["chunks"])
    assert "Sources:\n[KB] Warranty" in answer.formatted_response


async def test_kb_not_enough_goes_to_the_web_then_keywords(plan, knowledge, storage_url):
    model, script = plan(
        kb_search("refund period withdrawal"),
        call("web_search", query="EU right of withdrawal online purchase",
             context="The policies give 30 days for refunds"),
        call("index_keywords", keywords=["right of withdrawal", "Consumer Rights Directive",
                                         "14 days"]),
        respond(answer="The EU gives 14 days to withdraw; our policy gives 30 days.",
                sources=["Refund Policy",
                         "https://consumer-rights.example.eu/right-of-withdrawal"],
                used_external_kb=True, confidence_score=0.8))
    answer = await chat("What does EU law say about withdrawing from an online purchase?",
                        model, knowledge, storage_url, web_source="web")
    assert answer.used_internal_kb and answer.used_external_kb
    assert [s["kind"] for s in answer.sources] == ["kb", "web"]
    assert answer.sources[1]["url"] == "https://consumer-rights.example.eu/right-of-withdrawal"
    web = json.loads(tool_results(script.seen[2])[-1].content)
    assert web["citations"][0]["url"] == "https://consumer-rights.example.eu/right-of-withdrawal"
    assert web["metadata"]["backend"] == "offline"
    keywords = json.loads(tool_results(script.seen[3])[-1].content)
    assert keywords["keywords"] == ["right of withdrawal", "Consumer Rights Directive",
                                    "14 days"]
    assert keywords["indexed"] is True and keywords["keyword_count"] == 3   # the seed's shape
    assert keywords["linked_to"]["result"] is True


async def test_skipping_the_kb_call_gets_feedback_then_succeeds(plan, knowledge, storage_url):
    model, script = plan({"reply": "The warranty is two years."}, kb_search(), respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    assert answer.used_internal_kb
    feedback = script.seen[1][-1]
    assert feedback.role == "user"
    assert "Step 1 of 2" in feedback.content
    assert "'knowledge_base_search'" in feedback.content and "expected" in feedback.content


async def test_skipping_the_kb_call_twice_is_a_clear_error(plan, knowledge, storage_url):
    model, _ = plan({"reply": "Two years."}, {"reply": "Two years, really."})
    with pytest.raises(ChatError) as caught:
        await chat("How long is the warranty?", model, knowledge, storage_url)
    assert "without calling the required tool 'knowledge_base_search'" in str(caught.value)
    assert caught.value.run_id


async def test_answering_by_text_after_the_search_is_asked_for_generate_response(
        plan, knowledge, storage_url):
    model, script = plan(kb_search(), {"reply": "Two years."}, respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    assert answer.answer.startswith("Products carry")
    assert "Step 2 of 2" in script.seen[2][-1].content
    assert "'generate_response'" in script.seen[2][-1].content


async def test_generate_response_before_the_search_is_refused(plan, knowledge, storage_url):
    model, script = plan(respond(), kb_search(), respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    refused = tool_results(script.seen[1])[-1]
    assert "Step 1 of 2" in refused.content and "knowledge_base_search" in refused.content
    assert answer.tool_calls == ["generate_response", "knowledge_base_search",
                                 "generate_response"]


async def test_generate_response_failing_once_then_succeeding(plan, knowledge, storage_url):
    model, script = plan(kb_search(), respond(confidence_score=1.5), respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    rejection = tool_results(script.seen[2])[-1].content
    assert "confidence_score" in rejection
    assert answer.confidence_score == 0.9


async def test_generate_response_failing_twice_is_an_error(plan, knowledge, storage_url):
    model, _ = plan(kb_search(), respond(confidence_score=1.5), respond(sources=[]))
    with pytest.raises(ChatError) as caught:
        await chat("How long is the warranty?", model, knowledge, storage_url)
    assert "'generate_response' failed 2 time(s)" in str(caught.value)
    assert "sources" in str(caught.value)


async def test_invalid_tool_arguments_get_guidance_and_a_corrected_call_runs(
        plan, knowledge, storage_url):
    model, script = plan(call("knowledge_base_search", query="warranty", top_k="five"),
                         kb_search(), respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    guidance = tool_results(script.seen[1])[-1].content
    assert "top_k" in guidance and "integer" in guidance
    assert answer.tool_calls[:2] == ["knowledge_base_search", "knowledge_base_search"]


async def test_keywords_are_validated_merged_and_offered_to_a_later_question(
        plan, knowledge, storage_url):
    first_model, first = plan(
        kb_search("carbon neutral delivery"),
        call("web_search", query="carbon neutral parcel delivery"),
        call("index_keywords", keywords=["information", "carbon-neutral delivery",
                                         "Carbon-neutral  delivery", "the", "GreenPost",
                                         "parcel emissions"]),
        respond(answer="GreenPost offers carbon-neutral delivery.",
                sources=["https://green-shipping.example.org/carbon-neutral-parcels"],
                used_internal_kb=False, used_external_kb=True))
    await chat("Can my parcel be delivered carbon-neutral?", first_model, knowledge,
               storage_url, web_source="web")
    indexed = json.loads(tool_results(first.seen[3])[-1].content)
    assert indexed["keywords"] == ["carbon-neutral delivery", "GreenPost", "parcel emissions"]
    assert indexed["duplicates_merged"] == 1 and indexed["merged"] is True
    assert {r["keyword"]: r["reason"] for r in indexed["rejected"]} == {
        "information": "too generic to find anything again",
        "the": "a stop word"}

    second_model, second = plan(kb_search("GreenPost"), respond())
    await chat("Does GreenPost charge extra?", second_model, knowledge, storage_url)
    prompt = second.seen[0][-1].content
    assert "Earlier questions on the same subject (GreenPost)" in prompt
    assert "Can my parcel be delivered carbon-neutral?" in prompt
    assert "green-shipping.example.org" in prompt


async def test_too_few_usable_keywords_go_back_to_the_model(plan, knowledge, storage_url):
    model, script = plan(kb_search(), call("web_search", query="tent wind"),
                         call("index_keywords", keywords=["information", "help", "tent"]),
                         call("index_keywords", keywords=["tent pitching", "guy lines",
                                                          "deadman anchors"]),
                         respond(sources=["https://trail-guide.example.net/pitching-a-tent-"
                                          "in-wind"], used_external_kb=True))
    await chat("How do I pitch a tent in wind?", model, knowledge, storage_url,
               web_source="web")
    refused = tool_results(script.seen[3])[-1].content
    assert "1 usable keyword(s), at least 3 needed" in refused
    assert "information (too generic" in refused


async def test_session_history_is_sent_with_the_next_question_and_stored(
        plan, knowledge, storage_url):
    model, _ = plan(kb_search(), respond())
    first = await chat("How long is the warranty?", model, knowledge, storage_url)
    model, script = plan(kb_search("warranty claim"),
                         respond(answer="Send it with the receipt.", sources=["Warranty"]))
    second = await chat("And how do I claim it?", model, knowledge, storage_url,
                        session_id=first.session_id)
    assert second.session_id == first.session_id
    sent = [(m.role, m.content) for m in script.seen[0]]
    assert ("user", "How long is the warranty?") in sent
    assert ("assistant", WARRANTY_ANSWER["answer"]) in sent
    stored = await get_session(first.session_id, storage=storage_url)
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"] * 2
    assert stored["messages"][3]["run_id"] == second.run_id
    assert stored["title"] == "How long is the warranty?"
    listed = await list_sessions(storage=storage_url)
    assert [s["session_id"] for s in listed] == [first.session_id]
    assert listed[0]["message_count"] == 4


async def test_another_users_session_is_invisible(plan, knowledge, storage_url):
    model, _ = plan(kb_search(), respond())
    mine = await chat("How long is the warranty?", model, knowledge, storage_url, user="ana")
    assert await get_session(mine.session_id, user="bob", storage=storage_url) is None
    assert await list_sessions(user="bob", storage=storage_url) == []
    assert await delete_session(mine.session_id, user="bob", storage=storage_url) is False
    model, script = plan(kb_search(), respond())
    other = await chat("Hello?", model, knowledge, storage_url, user="bob",
                       session_id=mine.session_id)
    assert not [m for m in script.seen[0] if m.content == "How long is the warranty?"]
    assert other.session_id == mine.session_id        # same id, a different user's session
    assert await delete_session(mine.session_id, user="ana", storage=storage_url) is True
    assert await get_session(mine.session_id, user="ana", storage=storage_url) is None


async def test_bad_questions_and_session_ids_are_refused_before_running(storage_url):
    from flowforge.errors import InputError

    with pytest.raises(InputError, match="the question is empty"):
        await ask("   ", storage=storage_url)
    with pytest.raises(InputError, match="invalid session id"):
        await ask("hi", session_id="../etc", storage=storage_url)


async def test_a_missing_knowledge_base_is_said_before_any_model_call(plan, knowledge,
                                                                      storage_url):
    from flowforge.errors import NotFound

    model, script = plan()
    with pytest.raises(NotFound, match="no knowledge base named 'handbook'.*--kb path/to"):
        await ask("Hi?", kb="handbook", model=model, storage=storage_url,
                  services={"knowledge": knowledge})
    assert script.seen == []


async def test_a_mandatory_tool_that_keeps_failing_is_named_with_its_error(
        plan, knowledge, storage_url):
    # (a made-up kb_id no longer fails: the chat's own base is searched instead)
    model, _ = plan(call("knowledge_base_search", query="\x00\x01"),
                    {"reply": "Two years."},
                    call("knowledge_base_search", query="\x00\x01"),
                    {"reply": "Two years."})
    with pytest.raises(ChatError) as caught:
        await chat("How long is the warranty?", model, knowledge, storage_url)
    message = str(caught.value)
    assert "required tool 'knowledge_base_search'; it was called but failed" in message
    assert "the query is empty once control characters are removed" in message


async def test_a_knowledge_base_the_model_made_up_falls_back_to_the_chats_own(
        plan, knowledge, storage_url):
    model, script = plan(call("knowledge_base_search", query="warranty", kb_id="1234567890"),
                         respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    searched = json.loads(tool_results(script.seen[1])[-1].content)
    assert searched["kb_id"] == "policies" and searched["chunks"]
    assert "there is no knowledge base '1234567890'" in searched["note"]
    assert answer.sources[0]["title"] == "Warranty"


async def test_keywords_before_any_web_search_are_refused_with_the_next_step(
        plan, knowledge, storage_url):
    model, script = plan(kb_search(), call("index_keywords", keywords=["warranty period",
                                                                       "Summit line", "tents"]),
                         respond())
    answer = await chat("How long is the warranty?", model, knowledge, storage_url)
    refused = tool_results(script.seen[2])[-1].content
    assert "call web_search first" in refused and "generate_response instead" in refused
    assert answer.tool_calls == ["knowledge_base_search", "index_keywords", "generate_response"]



async def test_the_shipped_chat_sends_two_passages_and_offers_no_more(plan, knowledge,
                                                                      storage_url):
    """The 0.5B model asked for top_k 10 and answered from the wrong passage: the
    shipped chat's search gives two and a call may ask for no more (`max_top_k`)."""
    from flowforge.blocks._rag_tools import build_rag_tool

    model, script = plan(call("knowledge_base_search", query="warranty period",
                              kb_id="policies", top_k=10), respond())
    await chat("How long is the warranty?", model, knowledge, storage_url)
    searched = json.loads(tool_results(script.seen[1])[0].content)
    assert len(searched["chunks"]) == 2
    assert searched["note"] == "top_k 10 is more than this chat returns; 2 passages returned"
    tool = build_rag_tool("rag_search", {"top_k": 5, "max_top_k": 2}, name=None,
                          description=None, parameters=None, context=None, shared={})
    assert tool.parameters["properties"]["top_k"]["default"] == 2
    assert "at most 2" in tool.parameters["properties"]["top_k"]["description"]
