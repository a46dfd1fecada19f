"""A small embedded model answers the chat in the guided form (issue 47): the
passages the search returned, numbered and short with their best sentence
first, then the question, read last; the model gives a passage number and one
sentence, and the answer cites that passage's document.  Measured on
Qwen2.5-0.5B in bench/local_model.py --part chat; here a scripted model that
asks for the guided form plays the small model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flowforge.blocks._rag_tools import RagState
from flowforge.blocks._rag_tools.guided import guided_answer, short_passage
from flowforge.providers.scripted import FunctionProvider
from tests.apps.test_chat import chat, kb_search, respond

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "How long is the warranty?"


@pytest.fixture
def small_model(monkeypatch):
    monkeypatch.setattr(FunctionProvider, "guided_answers", True)


async def test_a_small_model_cites_a_numbered_passage_then_answers(small_model, plan,
                                                                    knowledge, storage_url):
    seen = {}

    def guided(messages):
        seen["messages"] = messages
        return {"reply": json.dumps({"answer": "Two years.", "according_to": 1})}

    model, script = plan(kb_search(), guided)
    answer = await chat(QUESTION, model, knowledge, storage_url)
    system, user = seen["messages"]
    assert system.role == "system" and "numbered passages" in system.content
    assert user.content.startswith("Passages:\n[1] (")
    assert user.content.endswith(f"\n\nQuestion: {QUESTION}")        # read last
    assert "[2] (" in user.content                                    # the chat's two passages
    first_title = re.match(r"Passages:\n\[1\] \((.+?)\)", user.content).group(1)
    assert answer.answer == "Two years."
    assert [s["title"] for s in answer.sources] == [first_title]
    assert answer.used_internal_kb and not answer.used_external_kb
    assert answer.formatted_response == f"Two years.\n\nSources:\n[KB] {first_title}"
    assert answer.tool_calls == ["knowledge_base_search", "generate_response"]
    assert len(script.seen) == 2                # the guided turn replaced the whole call


async def test_a_refused_guided_answer_is_retried_as_the_whole_call(small_model, plan,
                                                                     knowledge, storage_url):
    model, script = plan(kb_search(),
                         {"reply": json.dumps({"answer": "<b></b>", "according_to": 1})},
                         respond())
    answer = await chat(QUESTION, model, knowledge, storage_url)
    assert "`answer` is empty" in script.seen[2][-1].content     # the tool's error, in view
    assert answer.answer.startswith("Products carry a two-year warranty")


async def test_a_hosted_model_still_writes_the_whole_call(plan, knowledge, storage_url):
    model, script = plan(kb_search(), respond())
    answer = await chat(QUESTION, model, knowledge, storage_url)
    assert "generate_response" in script.tools_seen[1]
    assert not any("Passages:" in (m.content or "") for m in script.seen[1])
    assert answer.answer.startswith("Products carry")


def test_a_passage_is_shown_as_its_sentences_nearest_the_question():
    loyalty = (ROOT / "examples" / "policies" / "loyalty.md").read_text(encoding="utf-8")
    assert short_passage(loyalty, "When do loyalty points expire?").startswith(
        "Points expire 24 months after they were earned.")
    assert short_passage(loyalty, "How many points do members earn per euro?").startswith(
        "Members earn 1 point for every euro spent")
    shipping = (ROOT / "examples" / "policies" / "shipping.md").read_text(encoding="utf-8")
    shipping = shipping.split("\n---\n", 1)[1]           # as its chunks hold it
    # a table's row is one sentence, its cells named by their column
    assert short_passage(shipping, "express shipping cost", keep=1).startswith(
        "Domestic: Standard: 2-4 business days")


def test_the_passage_holding_the_answer_is_numbered_first():
    state = RagState(passages=[
        {"title": "Warranty", "kind": "kb", "content": "Tents from our Summit line carry a "
                                                       "lifetime warranty."},
        {"title": "Loyalty", "kind": "kb", "content": "Membership is free. Members earn 1 "
                                                      "point for every euro spent."}])
    form = guided_answer(state, "How many points do Summit Club members earn per euro?")
    prompt = form.messages[-1].content
    assert prompt.index("[1] (Loyalty) Members earn 1 point") < prompt.index("[2] (Warranty)")
    assert form.arguments({"answer": "One point per euro.", "according_to": 1})["sources"] == \
        ["Loyalty"]
    # the answer's words are the first passage's: that is what it cites
    assert form.arguments({"answer": "Members earn 1 point for every euro spent.",
                           "according_to": 2})["sources"] == ["Loyalty"]
