"""A scripted model for the research workflows: it recognises each LLM block
by its system prompt and answers with that role's next scripted answer, so a
test says "the question scores 0.5 then 0.9" rather than listing every turn."""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["ResearchScript", "ROLES", "research_options"]

#: role -> the start of its block's system prompt in the shipped workflows
ROLES = {
    "improve": "You improve research questions",
    "question_eval": "You judge research questions",
    "kb_plan": "You plan research.",
    "queries": "You write web search queries",
    "extract": "You extract facts",
    "update": "You keep a research knowledge base",
    "kb_eval": "You judge whether a knowledge base",
    "answer_plan": "You plan answers",
    "draft": "You write research answers",
    "answer_eval": "You review research answers",
    "refine": "You improve research answers",
    "guided": "You answer a question from numbered passages",     # brief mode's one call
}

WEB_URL = "https://trail-guide.example.net/pitching-a-tent-in-wind"


def _defaults() -> dict[str, Callable[[int], Any]]:
    return {
        "improve": lambda n: {"improved_question": f"How should a tent be pitched in strong "
                                                   f"wind (version {n + 1})?"},
        "question_eval": lambda n: {"question_improvement_confidence": 0.9,
                                    "feedback": "clear"},
        "kb_plan": lambda n: {"plan": "Find pitching technique and anchoring.",
                              "topics": ["orientation", "anchoring"]},
        "queries": lambda n: {"queries": ["pitching a tent in wind", "tent guy lines"]},
        "extract": lambda n: {"findings": [{"information": "Face the narrow end into the wind.",
                                            "sources": [WEB_URL]}]},
        "update": lambda n: {"knowledge": [{"topic": "orientation",
                                            "information": "Face the narrow end into the wind.",
                                            "sources": [WEB_URL]}],
                             "gaps": [] if n else ["anchoring in sand"]},
        "kb_eval": lambda n: {"kb_completeness_score": 0.9, "feedback": "complete",
                              "gaps": [] if n else ["anchoring in sand"]},
        "answer_plan": lambda n: {"outline": ["orientation", "anchoring"]},
        "draft": lambda n: {"answer": "Pitch the narrow end into the wind.",
                            "sources": [WEB_URL]},
        "answer_eval": lambda n: {"answer_confidence": 0.9, "feedback": "good"},
        "refine": lambda n: {"answer": f"Pitch the narrow end into the wind; stake the "
                                       f"windward corners first (refined {n + 1}).",
                             "sources": [WEB_URL]},
        "guided": lambda n: {"according_to": 1, "answer": "Face the narrow end into the wind."},
    }


class ResearchScript:
    """Answers each role from `scores` (a list of that role's scores, one per
    call, the last one repeated) or its default answer; `fail` names a role
    whose call raises; `hook(role, n)` is called before each answer (to cancel
    mid-run, say).  `calls[role]` holds the prompts each role was sent."""

    SCORE_FIELD = {"question_eval": "question_improvement_confidence",
                   "kb_eval": "kb_completeness_score", "answer_eval": "answer_confidence"}

    def __init__(self, scores: dict[str, list[float]] | None = None, *,
                 fail: str | None = None, hook: Callable[[str, int], Any] | None = None) -> None:
        self.scores = scores or {}
        self.fail = fail
        self.hook = hook
        self.answers = _defaults()
        self.calls: dict[str, list[str]] = {role: [] for role in ROLES}
        self.order: list[str] = []

    def role_of(self, messages) -> str:
        system = next((m.content or "" for m in messages if m.role == "system"), "")
        for role, start in ROLES.items():
            if system.startswith(start):
                return role
        raise AssertionError(f"no research role has the system prompt {system[:80]!r}")

    async def __call__(self, messages, tools):
        role = self.role_of(messages)
        n = len(self.calls[role])
        self.calls[role].append(messages[-1].content or "")
        self.order.append(role)
        if self.hook is not None:
            outcome = self.hook(role, n)
            if hasattr(outcome, "__await__"):
                await outcome
        if role == self.fail:
            raise RuntimeError(f"the scripted {role} model is down")
        answer = self.answers[role](n)
        if role in self.SCORE_FIELD and role in self.scores:
            given = self.scores[role]
            answer = {**answer, self.SCORE_FIELD[role]: given[min(n, len(given) - 1)],
                      "feedback": f"{role} feedback {n + 1}"}
        return json.dumps(answer)


def research_options(model: str, knowledge: object, storage_url: str, **more: object) -> dict:
    """`research()` options for a scripted model over the test's knowledge and database."""
    return {"model": model, "storage": storage_url, "services": {"knowledge": knowledge},
            "web_source": "web", **more}
