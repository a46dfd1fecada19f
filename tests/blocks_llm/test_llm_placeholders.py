"""An `llm` block's placeholders: what `validate` accepts runs (issue 41).

A `{placeholder}` with no `inputs` entry used to pass `validate` and fail the
run; and a `{{...}}` value holding a `{word}` (an answer, a web page) failed
the run, because the resolved text was read again for placeholders.  Only the
author's text is a template."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ValidationFailed

from .helpers import requests, run_blocks, scripted


def llm(**with_) -> dict:
    return {"id": "ask", "type": "llm", "with": with_}


@pytest.mark.parametrize("field, text, message", [
    ("prompt", "Summarize for a {audiense}: {text}",
     "blocks[0].with.prompt: the placeholder {audiense} has no value - did you mean "
     "'audience'?: add `audiense` to `inputs` (given: audience, text)"),
    ("system", "You write for {readers}.",
     "blocks[0].with.system: the placeholder {readers} has no value: add `readers` to "
     "`inputs` (given: audience, text)"),
])
def test_an_unknown_placeholder_is_a_located_validate_problem(field, text, message):
    with_ = {"prompt": "Summarize for a {audience}: {text}", field: text,
             "inputs": {"audience": "customer", "text": "{{input.text}}"}}
    doc = {"id": "t", "inputs": {"text": {"type": "string"}}, "blocks": [llm(**with_)]}
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(doc)
    assert [str(p) for p in caught.value.problems] == [message]


def test_a_path_a_literal_input_lacks_is_a_validate_problem():
    doc = {"id": "t", "blocks": [llm(prompt="Ship to {order.adress}",
                                     inputs={"order": {"address": "Main St"}})]}
    with pytest.raises(ValidationFailed, match=r"with.prompt: the placeholder "
                                               r"\{order.adress\} reads `adress`"):
        flowforge.load(doc)


def test_a_template_reference_is_not_a_placeholder():
    doc = {"id": "t", "inputs": {"text": {"type": "string"}},
           "blocks": [llm(prompt="Summarize: {{input.text}}")]}
    assert flowforge.load(doc) is not None


async def test_a_word_in_braces_brought_in_by_a_template_is_sent_as_it_is():
    page = "Use {name} and {order.id} as placeholders."
    with scripted(lambda m, t: "ok") as model:
        result = await run_blocks(
            [{"id": "fetch", "type": "set", "with": {"text": page}},
             llm(prompt="Explain to {who}: {{fetch.text}} ({{input.n}} words)",
                 system="Reader: {who}. Context: {{fetch.text}}",
                 inputs={"who": "Bo", "page": "{{fetch.text}}"}, model=model)],
            {"n": 3}, declare={"n": {"type": "integer"}})
    assert result.status == "succeeded", result.blocks["ask"].error
    sent = [m["content"] for m in requests(result, "ask")[0]["messages"]]
    assert sent == [f"Reader: Bo. Context: {page}", f"Explain to Bo: {page} (3 words)"]


async def test_an_input_value_with_braces_is_inert_too():
    with scripted(lambda m, t: "ok") as model:
        result = await run_blocks([llm(prompt="Echo {text}", inputs={"text": "{{input.t}}"},
                                       model=model)],
                                  {"t": "{text} and {other}"}, declare={"t": {"type": "string"}})
    assert requests(result, "ask")[0]["messages"][-1]["content"] == "Echo {text} and {other}"
