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
"""

from __future__ import annotations

import re
from typing import Any

from flowforge.blocks._rag_tools.state import RagState
from flowforge.providers._local_text import tables_as_rows
from flowforge.providers.base import Message
from flowforge.tools.spec import GuidedAnswer

__all__ = ["guided_answer", "short_passage"]

#: Sentences of a passage shown, best first (the rest is left out).
SENTENCES = 2
#: Passages shown at most (the first ones the tools returned).
PASSAGES = 5

SYSTEM = ("You answer a question from numbered passages. Give the number of the passage "
          "that answers it, then the answer in one short sentence that keeps the passage's "
          "own words and figures.")

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
#: Words that say nothing about which sentence answers a question.
_STOP = frozenset("""a an the and or of to in on at for from by with about as is are was were be
been do does did have has had how what when where which who whom why can could may might
shall should will would i me my we our you your it its this that these those there their
they them if than then so not no any all much many long""".split())


def _terms(text: str) -> set[str]:
    """Lower-cased content words, a plural's `s` dropped (`points` matches `point`)."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        out.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return out


def _sentences(content: str) -> list[str]:
    """A passage's sentences and table rows, headings left out."""
    out: list[str] = []
    for line in tables_as_rows(content).splitlines():
        line = line.strip().removeprefix("- ")      # a table's row, as a sentence
        if not line or line.startswith("#") or line.startswith("---"):
            continue
        out += [part.strip() for part in _SENTENCE.split(line) if part.strip()]
    return out


def _ranked(content: str, question: str) -> list[tuple[int, str]]:
    """(words shared with `question`, sentence) for each sentence, best first
    (ties in the passage's order)."""
    wanted = _terms(question)
    scored = [(len(wanted & _terms(sentence)), sentence) for sentence in _sentences(content)]
    return [scored[i] for i in sorted(range(len(scored)), key=lambda i: (-scored[i][0], i))]


def short_passage(content: str, question: str, keep: int = SENTENCES) -> str:
    """The `keep` sentences of `content` that share the most words with
    `question`, best first (ties in the passage's order)."""
    return " ".join(sentence for _, sentence in _ranked(content, question)[:keep])


def _by_best_sentence(passages: list[dict[str, Any]], question: str) -> list[dict[str, Any]]:
    """The passages whose best sentence shares the most words with the question
    first (ties in the search's order): the 0.5B model cited passage [1] when it
    held only a passing mention ("our Summit line") and [2] the answer."""
    best = [max((score for score, _ in _ranked(p["content"], question)), default=0)
            for p in passages]
    return [passages[i] for i in sorted(range(len(passages)), key=lambda i: (-best[i], i))]


def guided_answer(state: RagState, question: str) -> GuidedAnswer | None:
    """The guided form of `generate_response` for what the tools returned, or None
    before any passage was returned (the tool call is then asked for as it is)."""
    passages = _by_best_sentence(state.passages[:PASSAGES], question)
    if not passages or not question.strip():
        return None
    lines = [f"[{number}] ({passage['title']}) {short_passage(passage['content'], question)}"
             for number, passage in enumerate(passages, 1)]
    prompt = "Passages:\n" + "\n".join(lines) + f"\n\nQuestion: {question.strip()}"
    # the grammar writes the fields in name order: the passage's number, then the
    # answer (measured: answer first, 3 of 5 right; number first, 4 of 5)
    schema = {"type": "object", "additionalProperties": False,
              "required": ["according_to", "answer"],
              "properties": {
                  "according_to": {"enum": list(range(1, len(passages) + 1)),
                                   "description": "The number of the passage that answers."},
                  "answer": {"type": "string", "minLength": 1, "maxLength": 200,
                             "description": "The answer, one short sentence."}}}

    def arguments(said: dict[str, Any]) -> dict[str, Any]:
        number = _source_of(str(said["answer"]), int(said["according_to"]), passages)
        passage = passages[number - 1]
        web = passage.get("kind") == "web"
        return {"answer": str(said["answer"]).strip(),
                "sources": [passage.get("url") if web else passage["title"]],
                "used_internal_kb": not web, "used_external_kb": web}

    return GuidedAnswer([Message("system", SYSTEM), Message("user", prompt)], schema, arguments)


def _source_of(answer: str, chosen: int, passages: list[dict[str, Any]]) -> int:
    """The passage the answer was drawn from: the model's pick, unless another
    passage holds strictly more of the answer's words (the 0.5B model wrote the
    first passage's sentence and cited the second): a citation names the text the
    answer came from."""
    words = _terms(answer)
    shared = [len(words & _terms(p["content"])) for p in passages]
    best = max(range(len(passages)), key=lambda i: (shared[i], i == chosen - 1))
    return best + 1 if shared[best] > shared[chosen - 1] else chosen
