"""Saved KV-cache states (`_local_states`): two blocks taking turns on one local
model keep their evaluated prefixes, and an answer from a restored state is the
answer a cold model gives.  On local/smollm2, prompts of ~250 tokens."""

from __future__ import annotations

import pytest

from flowforge.providers.base import LLMRequest, Message
from flowforge.providers.local import LocalProvider, counters, default_model_path

POLICY = ("Refunds: items returned within 30 days of delivery are refunded in full to the "
          "original payment method. Sale items are refunded as store credit only. Gift cards, "
          "digital downloads and personalised items cannot be refunded. Refunds are processed "
          "within 5 business days after the returned item arrives at our warehouse. ") * 3
SYSTEMS = [f"You answer refund questions from this policy.\n\n{POLICY}",
           f"You grade answers from 0 to 10 against this policy.\n\n{POLICY}"]


def _ask(provider, system, question):
    import asyncio

    return asyncio.run(provider.complete(LLMRequest(
        model="m", messages=[Message("system", system), Message("user", question)],
        max_tokens=8, temperature=0)))


def _turns(provider):
    """Block A, block B, then A and B again with new questions: tokens evaluated by
    the second round, and its answers."""
    provider.loaded().llama.reset()
    for system in SYSTEMS:
        _ask(provider, system, "Can I get a refund after 3 weeks?")
    before = counters()
    answers = [_ask(provider, system, "Are gift cards refunded?").text for system in SYSTEMS]
    after = counters()
    return after["sent"] - before["sent"], after["evaluated"] - before["evaluated"], answers


@pytest.fixture(scope="module")
def path():
    return default_model_path()


def test_interleaved_blocks_keep_their_prefixes_and_answer_as_a_cold_model_does(path):
    sent, evaluated, answers = _turns(LocalProvider(path, states=4))
    assert sent > 400
    assert evaluated < sent * 0.15          # only each new question's tokens
    cold_sent, cold_evaluated, cold_answers = _turns(LocalProvider(path, states=0))
    assert cold_evaluated > cold_sent * 0.85    # without states: both prompts again
    assert answers == cold_answers
