"""`cited_answer`: an answer whose sources are the passages a search returned,
never names a model wrote.

    - id: final
      type: cited_answer
      with:
        question: "{{input.question}}"
        passages: "{{web.citations}}"    # a knowledge block's results work too
        # optional: an answer a model already wrote, and the sources it named
        answer: "{{refine.answer}}"
        cited: "{{refine.sources}}"

`passages` takes what searches returned as they returned it: a `web_search`
block's `citations`, a `knowledge` block's `results`, or both (each text
once; a withheld passage is never a source).  Without `answer`, the model
is asked in the form a small model can follow (`flowforge.knowledge.grounding`,
measured on Qwen2.5-0.5B): the passages numbered, each cut to the sentences
nearest the question, the question last, and an answer constrained to
`{"according_to": <passage number>, "answer": "..."}`; the source is that
passage's URL or document name.  With `answer`, no model is asked: each
citation in `cited` that names a gathered passage (its URL, document name,
title or `[n]`) becomes that passage's source, and any other is listed under
`unverified`, never as a source.  Research answers this way (issue 47: its
answer listed sources the model invented).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from flowforge.blocks._llm import USAGE_OUTPUTS, LLMBlockConfig, ModelCalls, choose_model, \
    setting
from flowforge.blocks.base import BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError
from flowforge.knowledge.grounding import (SYSTEM, answer_schema, by_best_sentence,
                                           checked_sources, gathered, numbered_prompt,
                                           on_topic, source_of)
from flowforge.providers.base import Message
from flowforge.providers.structured import StructuredAnswerError, ask_structured

__all__ = ["CitedAnswerBlock", "CitedAnswerConfig", "NOTHING_FOUND"]

#: The answer when the searches returned nothing to answer from (no model is asked).
NOTHING_FOUND = "The searches found nothing that answers this question."


class CitedAnswerConfig(LLMBlockConfig):
    question: str = Field(..., min_length=1, max_length=4000)
    """The question the answer is for."""
    passages: list[Any] | None = None
    """What the searches returned: web citations, knowledge hits, or both (None, a
    search that did not run, counts as nothing found)."""
    answer: str | None = None
    """An answer already written: then no model is asked, and only `cited` is checked."""
    cited: list[Any] | None = None
    """With `answer`: the sources it names (URLs, document names, titles or `[n]`)."""
    max_passages: int = Field(5, ge=1, le=20)
    """Passages shown to the model at most (those sharing most words with the question)."""
    sentences: int = Field(1, ge=1, le=10)
    """Sentences of each passage shown, those sharing most words with the question
    (measured on qwen2.5-0.5b, bench/local_model.py --part research: 1 sentence,
    4 of 4 right; 2, it answered "2-year" beside the Summit line's lifetime warranty)."""


@register_block
class CitedAnswerBlock(BlockType):
    """An answer drawn from gathered passages, its sources taken from them."""

    type_name = "cited_answer"
    Config = CitedAnswerConfig
    outputs = {
        "answer": Output("string", "The answer."),
        "sources": Output("list of strings", "The URL or document name of each gathered "
                          "passage the answer is drawn from; nothing else."),
        "unverified": Output("list of strings", "Citations in `cited` that name no gathered "
                             "passage: not sources."),
        "according_to": Output("integer or null", "The number of the passage the model "
                               "answered from (null when it was not asked)."),
        "passages": Output("list of {number, title, source, kind, content}",
                           "Every passage gathered, numbered."),
        **USAGE_OUTPUTS,
    }

    @classmethod
    async def run(cls, context: BlockContext, config: CitedAnswerConfig) -> Any:
        passages = gathered(config.passages)
        if config.answer is not None:
            sources, unverified = checked_sources(config.cited or [], passages)
            return {"answer": config.answer, "sources": sources, "unverified": unverified,
                    "according_to": None, "passages": passages, **_no_call()}
        shown = by_best_sentence(on_topic(passages, config.question),
                                 config.question)[:config.max_passages]
        if not shown:
            return {"answer": NOTHING_FOUND, "sources": [], "unverified": [],
                    "according_to": None, "passages": passages, **_no_call()}
        calls = ModelCalls(context, choose_model(context, config.model),
                           fallback=tuple(setting(context, config.fallback, "fallback", ()) or ()),
                           api_key=config.api_key, config=config)
        messages = [Message("system", SYSTEM),
                    Message("user", numbered_prompt(shown, config.question, config.sentences))]
        try:
            said, _, _ = await ask_structured(
                calls, messages, answer_schema(len(shown), described=False),
                temperature=setting(context, config.temperature, "temperature", 0),
                max_tokens=setting(context, config.max_tokens, "max_tokens", 160))
        except StructuredAnswerError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        answer = str(said["answer"]).strip()
        if not answer:
            raise BlockError(context.block_id, cls.type_name, "the model's answer is empty")
        number = source_of(answer, int(said["according_to"]), shown)
        passage = shown[number - 1]
        return {"answer": answer, "sources": [passage["source"]], "unverified": [],
                "according_to": passage["number"], "passages": passages, **calls.usage()}


def _no_call() -> dict[str, Any]:
    return {"model": None, "tokens": {"prompt": 0, "completion": 0, "total": 0},
            "cost": {"input": 0.0, "output": 0.0, "total": 0.0}}
