"""Decompose: the refined intent -> the blocks a pipeline needs, typed.

Each required block has a snake_case `suggested_id` (the id it gets if it
must be written; `name` is accepted for it), `depends_on` (the suggested
ids whose outputs it needs), what it does, its execution type (python for
deterministic work: parsing, maths, dates, HTTP; llm for language:
summarising, extracting, classifying, writing) and JSON Schemas of its
inputs and outputs.  Besides the schema, the answer is checked for valid
object schemas, unique ids and `depends_on` naming other blocks of the
plan; a bad answer is fed back once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from flowforge.registry import Registry
from flowforge.apps.thinker.events import BuildEvents
from flowforge.apps.thinker.llm import ThinkerLLM

__all__ = ["RequiredBlock", "decompose", "SCHEMA"]

_ID = "^[a-z][a-z0-9_]{1,63}$"
_TYPES = ["string", "number", "integer", "boolean", "array", "object"]
# What a planned block's schema may say, small enough for a grammar: each property a
# typed schema (a local model under a looser grammar wrote `"text": "string"`, which
# is no JSON Schema, and the plan failed twice); hosted models may add other keywords.
_PROPERTY_SCHEMA = {"type": "object",
                    "properties": {"type": {"enum": _TYPES}, "description": {"type": "string"},
                                   "items": {"type": "object",
                                             "properties": {"type": {"enum": _TYPES}},
                                             "required": ["type"]}},
                    "required": ["type"]}
_OBJECT_SCHEMA = {"type": "object", "properties": {"type": {"const": "object"},
                                                   "properties": {
                                                       "type": "object",
                                                       "additionalProperties": _PROPERTY_SCHEMA},
                                                   "required": {"type": "array",
                                                                "items": {"type": "string"}}},
                  "required": ["type", "properties"]}
SCHEMA = {
    "type": "object",
    "properties": {
        "blocks": {
            "type": "array", "minItems": 1, "maxItems": 12,
            "items": {
                "type": "object",
                "properties": {
                    "suggested_id": {"type": "string", "pattern": _ID},
                    "name": {"type": "string", "pattern": _ID},
                    "depends_on": {"type": "array", "items": {"type": "string"}},
                    "description": {"type": "string"},
                    "execution_type": {"enum": ["python", "llm"]},
                    "category": {"enum": ["input", "process", "action", "memory", "trigger"]},
                    "use_when": {"type": "string"},
                    "input_schema": _OBJECT_SCHEMA,
                    "output_schema": _OBJECT_SCHEMA,
                },
                # suggested_id required, so a grammar cannot let it go missing (issue
                # 47: the 0.5B model's plan failed at `blocks[0].suggested_id: missing`);
                # a `name` alone is still accepted: `_named` copies it before the check
                "required": ["suggested_id", "description", "execution_type",
                             "input_schema", "output_schema"],
            },
        },
    },
    "required": ["blocks"],
}

SYSTEM = """You are the planner of flowforge. Split the task into the smallest sequence of \
reusable blocks. Each block: a snake_case "suggested_id", "depends_on" (the suggested_ids \
of the earlier blocks whose outputs it needs, [] if none), a one-sentence "description", \
"execution_type" ("python" for deterministic work - parsing, maths, dates, lists, HTTP; "llm" \
for language work - summarising, extracting, classifying, writing), a "category" (input, \
process, action, memory, trigger), "use_when", and JSON Schemas "input_schema" and \
"output_schema" (type object, typed properties, required). Prefer the existing blocks listed \
when one fits: then use its exact id and field names. Answer with JSON only: {"blocks": [...]}"""


@dataclass
class RequiredBlock:
    name: str
    description: str
    execution_type: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    category: str = "process"
    use_when: str = ""
    depends_on: list[str] = field(default_factory=list)

    @property
    def suggested_id(self) -> str:
        """The contract's name for `name`: the id the block gets if it is written."""
        return self.name

    def to_dict(self) -> dict[str, Any]:
        return {"suggested_id": self.name, "name": self.name,
                "depends_on": list(self.depends_on), "description": self.description,
                "execution_type": self.execution_type, "category": self.category,
                "use_when": self.use_when, "input_schema": self.input_schema,
                "output_schema": self.output_schema}


def _id_of(block: dict[str, Any]) -> str:
    return block.get("suggested_id") or block.get("name") or ""


def _named(value: Any) -> Any:
    """`name` stands for a missing `suggested_id` (the seed's planners wrote either)."""
    blocks = value.get("blocks") if isinstance(value, dict) else None
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and not block.get("suggested_id") and block.get("name"):
            block["suggested_id"] = block["name"]
    return value


def _check(value: dict[str, Any]) -> list[str]:
    problems, seen = [], set()
    blocks = value.get("blocks", [])
    ids = {_id_of(block) for block in blocks}
    for index, block in enumerate(blocks):
        block_id = _id_of(block)
        if not block_id:
            problems.append(f"blocks[{index}].suggested_id: missing (a snake_case id)")
        elif block_id in seen:
            problems.append(f"blocks[{index}].suggested_id: '{block_id}' is used twice")
        for other in block.get("depends_on") or []:
            if other == block_id or other not in ids:
                problems.append(f"blocks[{index}].depends_on: '{other}' is not another block "
                                f"of the plan ({', '.join(sorted(ids - {block_id})) or 'none'})")
        seen.add(block_id)
        for key in ("input_schema", "output_schema"):
            try:
                jsonschema.validators.validator_for(block[key]).check_schema(block[key])
            except jsonschema.SchemaError as exc:
                problems.append(f"blocks[{index}].{key}: not a valid JSON Schema: {exc.message}")
    return problems


#: The least search score of a block listed to a local model as one that may fit.
#: The 0.5B model copied the fields of whatever was listed: asked to convert Celsius
#: to Fahrenheit beside math_percent_change (score 0.18; a fitting block scores
#: 0.55-0.67), it planned `old` -> `change, percent, direction`.
LOCAL_MIN_SCORE = 0.3


async def _catalogue(registry: Registry, intent: str, limit: int = 8,
                     min_score: float = 0.0) -> str:
    hits = [hit for hit in await registry.search(intent, limit=limit)
            if hit.score >= min_score]
    lines = []
    for hit in hits:
        d = hit.definition
        inputs = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in
                           (d.input_schema.get("properties") or {}).items())
        outputs = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in
                            (d.output_schema.get("properties") or {}).items())
        lines.append(f"- {d.id} ({d.execution_type}): {d.description} inputs({inputs}) -> "
                     f"outputs({outputs})")
    return "\n".join(lines)


async def decompose(intent: str, llm: ThinkerLLM, events: BuildEvents,
                    registry: Registry) -> list[RequiredBlock]:
    events.stage("decompose")
    catalogue = await _catalogue(registry, intent,
                                 min_score=LOCAL_MIN_SCORE if llm.local else 0.0)
    user = f"Task:\n{intent}\n\nExisting blocks that may fit:\n{catalogue or '(none)'}"
    if llm.local:   # the 0.5B model planned "count the words and summarise" as one counter
        user += "\n\nPlan one block for each action the task names."
    attempts = [0]

    def check(value: dict[str, Any]) -> list[str]:
        # Told at the stage that makes the plan, as each answer is checked (the
        # seed's clients show it there, not only when the pipeline is wired).
        attempts[0] += 1
        problems = _check(value)
        events.emit("validation", stage="decompose", valid=not problems, ok=not problems,
                    attempt=attempts[0], problems=problems)
        return problems

    answer = await llm.ask("decompose", SYSTEM, user, SCHEMA, check=check, prepare=_named)
    blocks = [RequiredBlock(name=re.sub(r"[^a-z0-9_]", "_", _id_of(b).lower()),
                            description=b["description"], execution_type=b["execution_type"],
                            input_schema=b["input_schema"], output_schema=b["output_schema"],
                            category=b.get("category") or "process",
                            use_when=b.get("use_when") or "",
                            depends_on=list(dict.fromkeys(b.get("depends_on") or [])))
              for b in answer["blocks"]]
    events.emit("decompose_blocks", blocks=[b.to_dict() for b in blocks])
    events.stage_result("decompose", required_blocks=[b.name for b in blocks],
                        count=len(blocks))
    return blocks
