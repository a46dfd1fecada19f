"""A router's prompt and schema favour no candidate for its place in the document
(issue 47: every local model sent "The app crashes when I open settings" to
billing; with the branches swapped, a 0.5B model sent every message to the one
listed last).  Driven by a scripted model that records what it was sent."""

from __future__ import annotations

import json

from .helpers import requests, run_blocks, scripted

CRASH = "The app crashes when I open settings"
BILLING = {"id": "billing", "type": "response", "name": "Billing", "after": ["route"],
           "description": "Payments, invoices, charges and refunds",
           "with": {"message": "billing"}}
TECH = {"id": "technical", "type": "response", "name": "Technical Support", "after": ["route"],
        "description": "Bugs, crashes, error messages and problems using the app",
        "with": {"message": "technical"}}


async def _sent(branches):
    def script(messages, tools):
        return '{"route": "technical"}'

    with scripted(script) as model:
        result = await run_blocks(
            [{"id": "route", "type": "router",
              "with": {"prompt": "Send the customer's message to the team that handles it. "
                                 "Message: {{input.q}}", "model": model}}, *branches],
            {"q": CRASH}, declare={"q": {"type": "string"}})
    assert result.results["route"]["selectedRoute"] == "technical"
    return requests(result, "route")[0]


def _without_candidates(system: str, branches) -> str:
    """The system prompt with each candidate's own lines taken out."""
    lines = system.splitlines()
    for branch in branches:
        start = lines.index(f"- ID: {branch['id']}")
        end = start + 1
        while end < len(lines) and lines[end].startswith("  "):
            end += 1
        del lines[start:end]
    return "\n".join(lines)


async def test_swapping_the_branches_only_swaps_their_descriptions():
    first = await _sent([BILLING, TECH])
    swapped = await _sent([TECH, BILLING])
    # the schema (and so a local model's grammar and the schema it is shown) is one
    assert first["response_format"] == swapped["response_format"]
    assert first["response_format"]["properties"]["route"]["enum"] == ["billing", "technical"]
    system, other = first["messages"][0]["content"], swapped["messages"][0]["content"]
    assert system != other
    rest = _without_candidates(system, [BILLING, TECH])
    assert rest == _without_candidates(other, [BILLING, TECH])
    # outside its own description, no candidate is named (no "one of: billing, technical")
    assert "billing" not in rest.lower() and "technical" not in rest.lower()


async def test_the_request_is_read_last_and_once():
    sent = await _sent([BILLING, TECH])
    messages = sent["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[-1]["content"].endswith(f"Message: {CRASH}")
    assert CRASH not in messages[0]["content"]
    assert json.dumps(sent["response_format"]).count("billing") == 1
