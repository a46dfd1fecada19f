"""The clarifier asks one question at a time and is ready after three user messages."""

from __future__ import annotations

import json

import pytest

from flowforge.providers.scripted import register_script, unregister_script
from flowforge.apps.thinker import clarify
from tests.thinker.conftest import rules


@pytest.fixture
def vague_model():
    """Always unsure: asks three questions at once, never ready by itself."""
    seen = []

    def model(messages, tools):
        seen.append(messages)
        if "MUST answer with ready true" in messages[0].content:
            return json.dumps({"ready": True, "refined_intent": {
                "goal": "Email a daily digest of AI papers",
                "steps": ["Fetch papers", "Rank by discussion", "Summarise the top three",
                          "Email the list"],
                "inputs": ["feed URL"], "outputs": ["an email"],
                "edge_cases": ["fewer than three papers"]}})
        return json.dumps({"ready": False, "question": "Which source? How many papers? "
                                                      "Which email address?"})

    # A fresh name per test: providers are cached per model string.
    name = f"vague-{id(seen)}"
    register_script(name, model)
    yield f"scripted/{name}", seen
    unregister_script(name)


async def test_an_unclear_intent_gets_exactly_one_question(vague_model):
    result = await clarify([{"role": "user", "content": "papers every morning"}],
                           model=vague_model[0])
    assert result.to_dict() == {"ready": False, "question": "Which source?"}


async def test_after_three_user_messages_it_is_ready_regardless(vague_model):
    conversation = [{"role": "user", "content": "papers every morning"},
                    {"role": "assistant", "content": "Which source?"},
                    {"role": "user", "content": "arXiv"},
                    {"role": "assistant", "content": "How many?"},
                    {"role": "user", "content": "three, by email"}]
    result = await clarify(conversation, model=vague_model[0])
    assert result.ready and result.forced
    assert result.refined_intent.startswith("Goal: Email a daily digest of AI papers\nSteps:\n"
                                            "1. Fetch papers")
    assert "Edge cases:\n- fewer than three papers" in result.refined_intent
    # The model saw the whole conversation.
    assert "user: arXiv" in vague_model[1][-1][-1].content


async def test_a_clear_intent_is_ready_with_a_self_contained_intent():
    result = await clarify("Count the words of a text and summarise it",
                           model=rules("word-summary"))
    assert result.ready and not result.forced
    assert set(result.intent) == {"goal", "steps", "inputs", "outputs", "edge_cases"}
    assert "Inputs:\n- text - the text to analyse" in result.refined_intent


async def test_a_malformed_answer_is_fed_back_once():
    answers = iter(['{"ready": false}', '{"ready": false, "question": "For whom?"}'])
    register_script("fixable", lambda messages, tools: next(answers))
    try:
        result = await clarify("write something", model="scripted/fixable")
    finally:
        unregister_script("fixable")
    assert result.question == "For whom?"


async def test_after_three_user_messages_the_code_writes_the_intent_if_the_model_will_not():
    """The model keeps asking even when told it must not: the clarifier is
    ready anyway, with the intent synthesised from the conversation."""
    calls = []

    def stubborn(messages, tools):
        calls.append(messages)
        return json.dumps({"ready": False, "question": "And which format?"})

    register_script("stubborn", stubborn)
    conversation = [{"role": "user", "content": "papers every morning"},
                    {"role": "assistant", "content": "Which source?"},
                    {"role": "user", "content": "arXiv"},
                    {"role": "assistant", "content": "How many?"},
                    {"role": "user", "content": "three, by email"}]
    try:
        result = await clarify(conversation, model="scripted/stubborn")
        two = await clarify(conversation[:3], model="scripted/stubborn")
    finally:
        unregister_script("stubborn")
    assert result.ready and result.forced and result.question is None
    assert result.refined_intent == ("Goal: papers every morning\nDetails from the user:\n"
                                     "- Which source? -> arXiv\n- How many? -> three, by email")
    assert result.to_dict()["ready"] is True and "question" not in result.to_dict()
    assert two.to_dict() == {"ready": False, "question": "And which format?"}
