"""An LLM registry block's optional input that a workflow does not give
renders empty in its prompt (AgentFlow's safe formatting), as `validate`
promises by accepting the workflow without it (issue 41): the run used to
fail with "the prompt's placeholder {extra} has no value"."""

from __future__ import annotations

import pytest

from flowforge.errors import ValidationFailed
from flowforge.providers.scripted import register_script, unregister_script
from tests.registry.test_uses import run, workflow

GREETER = {"id": "greeter", "name": "Greeter", "description": "Greets a person.",
           "execution_type": "llm",
           "input_schema": {"type": "object", "required": ["name"], "properties": {
               "name": {"type": "string"}, "extra": {"type": "string"}}},
           "output_schema": {"type": "object", "properties": {"greeting": {"type": "string"}}},
           "prompt_template": "Greet {name}.{extra}"}


@pytest.fixture
async def greeter(registry):
    await registry.add(GREETER)
    register_script("v41_greeter", lambda messages, tools: '{"greeting": "Hello"}')
    yield registry
    unregister_script("v41_greeter")


def prompts(result) -> list[str]:
    return [e["request"]["messages"][-1]["content"] for e in result.events
            if e["type"] == "llm_request"]


async def test_an_optional_input_not_given_renders_empty(greeter):
    result = await run(workflow({"id": "hi", "uses": "greeter", "with": {"name": "Ada"}}),
                       model="scripted/v41_greeter")
    assert result.status == "succeeded", result.error
    assert prompts(result) == ["Greet Ada."]
    assert result.results["hi"]["greeting"] == "Hello"


async def test_a_given_optional_input_is_used(greeter):
    result = await run(workflow({"id": "hi", "uses": "greeter",
                                 "with": {"name": "Ada", "extra": " Mention the weather."}}),
                       model="scripted/v41_greeter")
    assert prompts(result) == ["Greet Ada. Mention the weather."]


async def test_a_required_input_is_still_required(greeter):
    with pytest.raises(ValidationFailed, match="needs input 'name'"):
        await run(workflow({"id": "hi", "uses": "greeter", "with": {"extra": "x"}}))


async def test_a_system_prompt_placeholder_that_is_no_input_is_refused(registry):
    """The system prompt is filled from the inputs as the prompt is: an
    undeclared `{placeholder}` in it used to be accepted and fail every run."""
    with pytest.raises(ValidationFailed) as caught:
        await registry.add({**GREETER, "system_prompt": "Write for {nme}."})
    assert [str(p) for p in caught.value.problems] == [
        "system_prompt: placeholder '{nme}' is not an input - did you mean 'name'?; "
        "declared inputs: extra, name"]


async def test_an_input_holding_braces_is_sent_as_it_is(greeter):
    result = await run(workflow({"id": "hi", "uses": "greeter",
                                 "with": {"name": "{extra} {name}", "extra": "!"}}),
                       model="scripted/v41_greeter")
    assert prompts(result) == ["Greet {extra} {name}.!"]
