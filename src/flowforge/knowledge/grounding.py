"""Answers tied to the passages a search returned: the passages numbered and
cut short for a small model, the answer's source read off the passage it
came from, and sources a model wrote checked against what was gathered.

Measured on Qwen2.5-Coder-0.5B (bench/local_model.py, issue 47): asked for a
whole answer after long context, the model wrote back the most prominent
short text in front of it (a title, an earlier answer, the question), and
asked for sources it wrote names no search had returned.  What a small
extractive reader needs instead: the passages numbered and short, each led by
its sentences that share the most words with the question (a table's rows
count as sentences), then the question itself, read last; the model picks the
number of a passage, then writes one sentence (`numbered_prompt`,
`answer_schema`).  The source is that passage's, so a citation is true by
construction (`source_of` moves it to the passage the answer's words came
from).  The RAG chat's guided answer (`blocks/_rag_tools/guided.py`) and the
research answer (the `cited_answer` block) both use this module.

A passage here is `{number, title, source, kind, content}`: `source` is the
page's URL for a web page, the document's name for a knowledge-base passage.
`gathered` makes them from what the searches returned (web citations,
knowledge hits, or passages already made), and `checked_sources` keeps, of
the sources a model wrote, only those naming a gathered passage.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from flowforge.providers.local_text import tables_as_rows

__all__ = ["SYSTEM", "SENTENCES", "short_passage", "by_best_sentence", "on_topic",
           "numbered_prompt",
           "answer_schema", "source_of", "gathered", "checked_sources"]

#: Sentences of a passage shown, best first (the rest is left out).
SENTENCES = 2

SYSTEM = ("You answer a question from numbered passages. Give the number of the passage "
          "that answers it, then the answer in one short sentence that keeps the passage's "
          "own words and figures.")

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
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
    """A passage's sentences and table rows, headings and front matter left out."""
    out: list[str] = []
    for line in tables_as_rows(_FRONT_MATTER.sub("", content)).splitlines():
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


def _best(passage: dict[str, Any], question: str) -> int:
    return max((score for score, _ in _ranked(passage["content"], question)), default=0)


def by_best_sentence(passages: list[dict[str, Any]], question: str) -> list[dict[str, Any]]:
    """The passages whose best sentence shares the most words with the question
    first (ties in the given order): the 0.5B model cited passage [1] when it
    held only a passing mention ("our Summit line") and [2] the answer."""
    best = [_best(p, question) for p in passages]
    return [passages[i] for i in sorted(range(len(passages)), key=lambda i: (-best[i], i))]


def on_topic(passages: list[dict[str, Any]], question: str) -> list[dict[str, Any]]:
    """The passages with a sentence sharing a word with the question (all of them
    when none has): a search returns its top hits whatever they say, and a small
    model shown "(Altitude sickness)" beside the answer may pick it."""
    kept = [p for p in passages if _best(p, question) > 0]
    return kept or list(passages)


def numbered_prompt(passages: list[dict[str, Any]], question: str,
                    keep: int = SENTENCES) -> str:
    """The passages numbered from 1, each `(title)` and its `keep` sentences nearest
    the question, then the question, read last."""
    lines = [f"[{number}] ({passage['title']}) "
             f"{short_passage(passage['content'], question, keep)}"
             for number, passage in enumerate(passages, 1)]
    return "Passages:\n" + "\n".join(lines) + f"\n\nQuestion: {question.strip()}"


def answer_schema(count: int, described: bool = True) -> dict[str, Any]:
    """`{"according_to": <1..count>, "answer": "..."}`.  A grammar writes the fields
    in name order: the passage's number, then the answer (measured: answer first,
    3 of 5 right; number first, 4 of 5).  `described=False` leaves out the fields'
    descriptions, which a local model reads in its system prompt: shown one
    sentence a passage, qwen2.5-0.5b answered the Summit warranty question with
    the description itself ("The number of the passage that answers.")."""
    according_to: dict[str, Any] = {"enum": list(range(1, count + 1))}
    answer: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 200}
    if described:
        according_to["description"] = "The number of the passage that answers."
        answer["description"] = "The answer, one short sentence."
    return {"type": "object", "additionalProperties": False,
            "required": ["according_to", "answer"],
            "properties": {"according_to": according_to, "answer": answer}}


def source_of(answer: str, chosen: int, passages: list[dict[str, Any]]) -> int:
    """The number of the passage the answer was drawn from: the model's pick,
    unless another passage holds strictly more of the answer's words (the 0.5B
    model wrote the first passage's sentence and cited the second): a citation
    names the text the answer came from."""
    words = _terms(answer)
    shared = [len(words & _terms(p["content"])) for p in passages]
    best = max(range(len(passages)), key=lambda i: (shared[i], i == chosen - 1))
    return best + 1 if shared[best] > shared[chosen - 1] else chosen


def _passage(item: Any) -> dict[str, Any] | None:
    """One search result as a passage; None for what cannot be cited (a withheld
    passage, one with no text or no source)."""
    if not isinstance(item, dict) or item.get("withheld"):
        return None
    if "url" in item:                                   # a web citation
        source, kind = item.get("url"), "web"
        content = item.get("snippet") if "snippet" in item else item.get("content")
        if isinstance(content, str) and item.get("title"):
            # a snippet is one line: its page's heading would hide its first sentence
            content = re.sub(r"^\s*#+\s*" + re.escape(str(item["title"])) + r"\s*", "",
                             content)
    elif "documentName" in item or "documentId" in item:        # a knowledge hit
        source, kind = item.get("documentName") or item.get("documentId"), "kb"
        content = item.get("content")
    else:                                               # a passage already made
        source, kind, content = item.get("source"), item.get("kind") or "kb", item.get("content")
    if not source or not isinstance(content, str) or not content.strip():
        return None
    return {"title": str(item.get("title") or source), "source": str(source), "kind": kind,
            "content": content}


def gathered(*found: Iterable[Any] | None) -> list[dict[str, Any]]:
    """The passages of what searches returned (lists of web citations, knowledge
    hits or passages; None for a search that did not run), in order, each text
    once, numbered from 1."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for items in found:
        for item in items or []:
            passage = _passage(item)
            if passage is None or (passage["source"], passage["content"]) in seen:
                continue
            seen.add((passage["source"], passage["content"]))
            out.append({"number": len(out) + 1, **passage})
    return out


def _key(text: str) -> str:
    return " ".join(_WORD.findall(str(text).lower()))


def checked_sources(cited: Iterable[Any], passages: list[dict[str, Any]]
                    ) -> tuple[list[str], list[str]]:
    """(sources, unverified): each citation a model wrote that names a gathered
    passage (its URL or document name, its title, or `[n]`, its number) becomes
    that passage's source, once; a citation that names none is unverified,
    never a source."""
    by_name: dict[str, dict[str, Any]] = {}
    for passage in passages:
        for name in (passage["source"], passage["title"], f"[{passage['number']}]"):
            by_name.setdefault(_key(name), passage)
    sources: list[str] = []
    unverified: list[str] = []
    for citation in cited or []:
        text = str(citation.get("source") or citation.get("url") or citation.get("title") or "")\
            if isinstance(citation, dict) else str(citation)
        if not text.strip():
            continue
        passage = by_name.get(_key(text))
        if passage is None:
            unverified.append(text)
        elif passage["source"] not in sources:
            sources.append(passage["source"])
    return sources, unverified
