"""The clarifier: is the intent clear enough to build? If not, one question.

`clarify(conversation)` takes the chat so far (`[{role: user|assistant,
content}]`) and returns `{ready: false, question}` (exactly one question)
or `{ready: true, refined_intent}`, where the refined intent is
self-contained: goal, steps, inputs, outputs and edge cases, so the thinker
needs nothing else from the conversation.  After three user messages it is
ready regardless (the user has answered enough questions): the model is
told it must write the refined intent from what it has, and when it still
asks or fails, the code synthesises the intent from the conversation itself
(`synthesise_intent`), so a fourth question is never asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from flowforge.apps.thinker.events import BuildEvents
from flowforge.apps.thinker.llm import ThinkerError, ThinkerLLM, default_build_model

__all__ = ["clarify", "ClarifyResult", "MAX_USER_MESSAGES", "format_intent",
           "synthesise_intent"]

MAX_USER_MESSAGES = 3

_INTENT = {
    "type": "object",
    "properties": {
        "goal": {"type": "string"},
        "steps": {"type": "array", "items": {"type": "string"}},
        "inputs": {"type": "array", "items": {"type": "string"}},
        "outputs": {"type": "array", "items": {"type": "string"}},
        "edge_cases": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["goal", "steps", "inputs", "outputs", "edge_cases"],
}
SCHEMA = {
    "type": "object",
    "properties": {
        "ready": {"type": "boolean"},
        "question": {"type": ["string", "null"]},
        "refined_intent": {"anyOf": [_INTENT, {"type": "null"}]},
    },
    "required": ["ready"],
}

SYSTEM = """You are the clarifier of flowforge, which turns a user's request into an automated \
workflow. Decide whether the conversation names a clear action and enough context to build it \
(what goes in, what comes out, where results go, how often).
- If something essential is missing, answer {"ready": false, "question": "<ONE short question>"}. \
Ask exactly one question, the most important one.
- Otherwise answer {"ready": true, "refined_intent": {"goal", "steps", "inputs", "outputs", \
"edge_cases"}}: a self-contained description a builder can follow without the conversation.
Answer with JSON only."""

FORCED = "\n\nThe user has answered enough questions: you MUST answer with ready true and a " \
         "refined_intent, filling gaps with sensible defaults."


@dataclass
class ClarifyResult:
    ready: bool
    question: str | None = None
    refined_intent: str | None = None
    intent: dict[str, Any] = field(default_factory=dict)
    forced: bool = False

    def to_dict(self) -> dict[str, Any]:
        if self.ready:
            return {"ready": True, "refined_intent": self.refined_intent,
                    "intent": self.intent, "forced": self.forced}
        return {"ready": False, "question": self.question}


def format_intent(intent: dict[str, Any]) -> str:
    """The structured intent as the self-contained text the thinker reads."""
    lines = [f"Goal: {intent.get('goal', '').strip()}"]
    for key, title in (("steps", "Steps"), ("inputs", "Inputs"), ("outputs", "Outputs"),
                       ("edge_cases", "Edge cases"), ("details", "Details from the user")):
        items = [str(item).strip() for item in intent.get(key) or [] if str(item).strip()]
        if items:
            lines.append(f"{title}:")
            lines += [f"{i}. {item}" if key == "steps" else f"- {item}"
                      for i, item in enumerate(items, 1)]
    return "\n".join(lines)


def _one_question(text: str) -> str:
    """Keep the first question only (models like to ask three)."""
    text = text.strip()
    match = re.search(r"^(.*?\?)", text, re.DOTALL)
    return (match.group(1) if match else text).strip()


def synthesise_intent(conversation: list[dict[str, Any]]) -> dict[str, Any]:
    """The structured intent written from the conversation alone: the first
    user message is the goal, every later answer a detail (with the question
    it answers).  Used when the model will not write one after three user
    messages."""
    goal, details, question = "", [], ""
    for message in conversation:
        content = str(message.get("content", "")).strip()
        if message.get("role", "user") != "user":
            question = content
        elif not goal:
            goal = content
        elif content:
            details.append(f"{question} -> {content}" if question else content)
            question = ""
    return {"goal": goal, "steps": [], "inputs": [], "outputs": [], "edge_cases": [],
            "details": details}


def _transcript(conversation: list[dict[str, Any]]) -> str:
    return "\n".join(f"{m.get('role', 'user')}: {str(m.get('content', '')).strip()}"
                     for m in conversation)


async def clarify(conversation: list[dict[str, Any]] | str, *, model: str | None = None,
                  events: BuildEvents | None = None,
                  env: Mapping[str, str] | None = None) -> ClarifyResult:
    """One clarifier turn. A plain string is a one-message conversation."""
    if isinstance(conversation, str):
        conversation = [{"role": "user", "content": conversation}]
    events = events or BuildEvents()
    user_messages = sum(1 for m in conversation if m.get("role", "user") == "user")
    forced = user_messages >= MAX_USER_MESSAGES
    events.stage("clarify", user_messages=user_messages, forced=forced)
    llm = ThinkerLLM(model or default_build_model(), events, env=env)
    system = SYSTEM + (FORCED if forced else "")

    def check(value: dict[str, Any]) -> list[str]:
        if value.get("ready") or forced:
            return [] if value.get("refined_intent") else \
                ["ready answers need a refined_intent object"]
        return [] if (value.get("question") or "").strip() else \
            ["answers that are not ready need one question"]

    prompt = f"Conversation so far:\n{_transcript(conversation)}"
    if not forced:
        answer = await llm.ask("clarify", system, prompt, SCHEMA, check=check)
        if answer.get("ready"):
            intent = answer.get("refined_intent") or {}
            return ClarifyResult(True, refined_intent=format_intent(intent), intent=intent)
        return ClarifyResult(False, question=_one_question(answer["question"]))
    try:
        answer = await llm.ask("clarify", system, prompt, SCHEMA, check=check)
        intent = answer.get("refined_intent") or {}
    except ThinkerError:
        intent = {}
    if not str(intent.get("goal") or "").strip():
        intent = synthesise_intent(conversation)
        events.stage_result("clarify", synthesised=True)
    return ClarifyResult(True, refined_intent=format_intent(intent), intent=intent, forced=True)
