"""`generate_response` laid out for a small model: the question after short
numbered passages, and an answer constrained to `{"according_to": <n>,
"answer": "..."}`, which becomes the tool's real arguments.

Measured on Qwen2.5-Coder-0.5B in the RAG chat (bench/local_model.py, issue
47): asked for the whole `generate_response` call after the system prompt,
the tool list, the session's history and two long passages, the model wrote
back the most prominent short text in front of it (a title, "30 days" from an
earlier answer, the question): 1 of 5 right.  What a small extractive reader
needs instead: the passages numbered and short, each led by its sentences
that share the most words with the question (a table's rows count as
sentences), then the question itself, read last.  The model picks the number
of the passage first and then writes one sentence; the cited source is that
passage's document, so a citation is true by construction, and the tool
checks the arguments as it checks any call.  Only providers that ask for it
(`Provider.guided_answers`: the embedded llama.cpp models) get this form.
The layout itself is `flowforge.knowledge.grounding`'s, shared with research.
"""

from __future__ import annotations

from typing import Any

from flowforge.blocks._rag_tools.state import RagState
from flowforge.knowledge.grounding import (SYSTEM, answer_schema, by_best_sentence,
                                           numbered_prompt, short_passage, source_of)
from flowforge.providers.base import Message
from flowforge.tools.spec import GuidedAnswer

__all__ = ["guided_answer", "short_passage"]

#: Passages shown at most (the first ones the tools returned).
PASSAGES = 5


def guided_answer(state: RagState, question: str) -> GuidedAnswer | None:
    """The guided form of `generate_response` for what the tools returned, or None
    before any passage was returned (the tool call is then asked for as it is)."""
    passages = by_best_sentence(state.passages[:PASSAGES], question)
    if not passages or not question.strip():
        return None
    prompt = numbered_prompt(passages, question)
    schema = answer_schema(len(passages))

    def arguments(said: dict[str, Any]) -> dict[str, Any]:
        number = source_of(str(said["answer"]), int(said["according_to"]), passages)
        passage = passages[number - 1]
        web = passage.get("kind") == "web"
        return {"answer": str(said["answer"]).strip(),
                "sources": [passage.get("url") if web else passage["title"]],
                "used_internal_kb": not web, "used_external_kb": web}

    return GuidedAnswer([Message("system", SYSTEM), Message("user", prompt)], schema, arguments)
