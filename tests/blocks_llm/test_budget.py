"""Run budgets: checked before each LLM call, stopping the run with a clear
error or switching to the downgrade model, and saying so in the events."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ValidationFailed, WorkflowError
from flowforge.storage import storage_from_url

from .helpers import events, requests, run_blocks, statuses

WORDS = "one two three four five six seven eight nine ten"


def _chain(model: str, n: int = 3) -> list[dict]:
    blocks = []
    for i in range(n):
        blocks.append({"id": f"step{i}", "type": "llm",
                       "after": [f"step{i - 1}"] if i else [],
                       "with": {"prompt": f"say {WORDS}", "model": model, "max_tokens": 20}})
    return blocks


# Each call of the chain: a prompt estimated at 21 tokens (about four characters a
# token) and, as the scripted model counts them, 11 prompt + 10 answer tokens used.
PROMPT_ESTIMATE, USED_PER_CALL = 21, 21


async def test_budget_stops_the_run_when_even_the_prompt_does_not_fit():
    from .helpers import scripted
    seen: list[str] = []

    def answer(messages, tools):
        seen.append("call")
        return WORDS
    budget = 2 * USED_PER_CALL + PROMPT_ESTIMATE        # 63: no room left for an answer
    with scripted(answer) as model:
        result = await run_blocks(_chain(model), budget={"tokens": budget})
    assert result.status == "failed"
    assert statuses(result) == {"step0": "succeeded", "step1": "succeeded",
                                "step2": "failed"}
    assert len(seen) == 2                  # the third call never went out
    error = result.blocks["step2"].error
    assert f"budget exceeded: the run's budget allows {budget} tokens" in error
    assert "42 tokens used so far" in error and model in error
    assert "alone needs about 21 tokens, leaving no room for an answer" in error
    exceeded = events(result, "budget_exceeded", "step2")
    assert exceeded and exceeded[0]["limit"] == budget and exceeded[0]["measure"] == "tokens"
    assert exceeded[0]["used"] == result.usage["tokens"]["total"]
    assert not events(result, "budget_capped")      # the first two fitted whole


async def test_a_call_is_capped_to_what_the_budget_has_left():
    from .helpers import scripted
    with scripted(lambda m, t: WORDS) as model:
        result = await run_blocks(_chain(model), budget={"tokens": 70})
    assert result.status == "succeeded"
    left = 70 - 2 * USED_PER_CALL - PROMPT_ESTIMATE       # 7 answer tokens for step2
    capped = events(result, "budget_capped")
    assert [(e["block_id"], e["max_tokens"], e["capped_to"]) for e in capped] == \
        [("step2", 20, left)]
    assert requests(result, "step2")[0]["max_tokens"] == left   # what was sent
    assert result.results["step2"]["content"] == " ".join(WORDS.split()[:left])
    assert result.usage["tokens"]["total"] <= 70


async def test_a_small_budget_answers_a_short_prompt():
    """A 150-token budget and a two-word prompt with no `max_tokens`: the
    answer's 1024 default tokens are capped to what is left, not refused."""
    from .helpers import scripted
    with scripted(lambda m, t: "word " * 500) as model:
        result = await run_blocks([{"id": "hi", "type": "llm",
                                    "with": {"prompt": "Hi there", "model": model}}],
                                  budget={"tokens": 150})
    assert result.status == "succeeded", result.error
    capped = events(result, "budget_capped", "hi")
    assert capped and capped[0]["max_tokens"] == 1024 and capped[0]["capped_to"] == 140
    assert len(result.results["hi"]["content"].split()) == 140
    assert result.usage["tokens"]["total"] <= 150


async def test_budget_downgrades_the_model_and_says_so():
    from .helpers import scripted
    with scripted(lambda m, t: WORDS) as big, scripted(lambda m, t: "cheap answer") as small:
        doc = {"id": "t", "blocks": _chain(big),
               "budget": {"tokens": 70, "on_exceed": {"downgrade": small}}}
        result = await flowforge.run(doc, storage=False)
    assert result.status == "succeeded"
    assert result.results["step0"]["content"] == WORDS
    assert result.results["step2"]["content"] == "cheap answer"
    assert result.results["step2"]["model"] == small
    switched = events(result, "budget_downgrade")
    assert len(switched) == 1 and switched[0]["block_id"] == "step2"
    assert switched[0]["model"] == big and switched[0]["downgrade"] == small


async def test_parallel_calls_cannot_together_pass_the_budget():
    import asyncio

    from .helpers import scripted

    async def slow(messages, tools):
        await asyncio.sleep(0.05)
        return WORDS
    with scripted(slow) as model:
        blocks = [{"id": name, "type": "llm", "with": {"prompt": f"say {WORDS}", "model": model,
                                                       "max_tokens": 20}}
                  for name in ("left", "right")]
        result = await run_blocks(blocks, budget={"tokens": 60})   # room for one call
    assert sorted(statuses(result).values()) == ["failed", "succeeded"]


async def test_request_budget_replaces_the_documents():
    from .helpers import scripted
    with scripted(lambda m, t: WORDS) as model:
        doc = {"id": "t", "blocks": _chain(model), "budget": {"tokens": 10}}
        result = await flowforge.run(doc, storage=False, budget={"tokens": 100000})
        assert result.status == "succeeded"
        with pytest.raises(WorkflowError, match=r"budget.*tokens"):
            await flowforge.run(doc, storage=False, budget={"tokens": "many"})


async def test_budget_counts_what_resumed_blocks_spent(tmp_path):
    from .helpers import scripted
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    with scripted(lambda m, t: WORDS) as model:
        # 42 tokens: step0 fits whole; after it, step1's prompt leaves no room.
        doc = {"id": "t", "blocks": _chain(model, 2), "budget": {"tokens": 42}}
        first = await flowforge.run(doc, storage=storage)
        assert statuses(first) == {"step0": "succeeded", "step1": "failed"}
        spent = first.results["step0"]["tokens"]["total"]
        # Resumed, step0 is not run again, but what it spent still counts.
        again = await flowforge.resume(first.run_id, storage=storage)
    await storage.close()
    assert again.status == "failed" and "budget exceeded" in again.blocks["step1"].error
    assert events(again, "budget_exceeded", "step1")[-1]["used"] == spent


async def test_a_request_budget_still_applies_when_the_run_is_resumed(tmp_path):
    from .helpers import scripted
    storage = storage_from_url(f"sqlite:///{tmp_path / 'runs.db'}")
    with scripted(lambda m, t: WORDS) as model:
        doc = {"id": "t", "blocks": _chain(model, 2)}
        first = await flowforge.run(doc, storage=storage, budget={"tokens": 42})
        assert first.status == "failed"
        again = await flowforge.resume(first.run_id, storage=storage)
    await storage.close()
    assert again.status == "failed" and "the run's budget allows 42 tokens" in \
        again.blocks["step1"].error


def test_validate_catches_a_bad_budget():
    doc = {"id": "t", "budget": {"tokens": 0, "on_exceed": "downgrade"},
           "blocks": [{"id": "a", "type": "set", "with": {"x": 1}}]}
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(doc)
    text = str(caught.value)
    assert "budget.tokens" in text and "budget.on_exceed" in text
    assert "downgrade: <provider/model>" in text
    with pytest.raises(ValidationFailed, match="a budget needs `tokens`, `cost` or both"):
        flowforge.load({"id": "t", "budget": {}, "blocks": []})
