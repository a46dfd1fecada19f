"""Wire: the model assembles the Pipeline JSON from the blocks at hand.

The answer is validated by the engine's own validator (through
`formats.pipeline_json.validate_pipeline`: every reference resolvable, every
required input supplied, no cycle, every `{{nX.field}}` a declared output of
a fitting type) and may only use the blocks it was given.  Invalid wiring
is fed back once, with every problem located.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.registry import BlockDefinition, Registry
from flowforge.formats.pipeline_json import pipeline_warnings, validate_pipeline
from flowforge.apps.thinker.events import BuildEvents
from flowforge.apps.thinker.llm import ThinkerLLM

__all__ = ["wire", "SCHEMA"]

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "nodes": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                           "block_id": {"type": "string"}, "inputs": {"type": "object"}},
            "required": ["id", "block_id", "inputs"]}},
        "edges": {"type": "array", "items": {
            "type": "object", "properties": {"from": {"type": "string"},
                                             "to": {"type": "string"}},
            "required": ["from", "to"]}},
        "memory_keys": {"type": "array", "items": {"type": "string"}},
        "inputs": {"type": "object"},
    },
    "required": ["id", "name", "nodes", "edges"],
}

SYSTEM = """You are the wiring stage of flowforge. Connect the given blocks into a Pipeline: \
nodes n1, n2, ... each with a "block_id" from the list and "inputs" for every required input of \
that block. An input value is a constant, "{{input.<name>}}" for a value the user gives when \
running, or "{{nX.<output field>}}" for an output of an earlier node. Add an edge {"from", \
"to"} for every dependency. "inputs" (optional) declares run inputs as JSON Schema properties. \
Answer with JSON only: {"id", "name", "nodes", "edges", "memory_keys", "inputs"}."""


def _describe(block: BlockDefinition) -> str:
    return json.dumps({"block_id": block.id, "description": block.description,
                       "input_schema": block.input_schema,
                       "output_schema": block.output_schema}, ensure_ascii=False)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "pipeline"


async def wire(intent: str, blocks: list[BlockDefinition], llm: ThinkerLLM,
               events: BuildEvents, registry: Registry) -> dict[str, Any]:
    events.stage("wire", blocks=[b.id for b in blocks])
    available = {b.id for b in blocks}
    attempts = [0]

    def check(value: dict[str, Any]) -> list[str]:
        attempts[0] += 1
        pipeline = {**value, "id": _slug(value.get("id") or value.get("name") or intent),
                    "user_prompt": intent}
        problems = [f"nodes[{i}].block_id: '{n.get('block_id')}' is not one of the available "
                    f"blocks ({', '.join(sorted(available))})"
                    for i, n in enumerate(value.get("nodes", []))
                    if n.get("block_id", "").split("@")[0] not in available]
        if not problems:
            # What the seed lets through (a missing output reads null), the
            # thinker fixes anyway: it wrote the reference.
            problems = [str(p) for p in (validate_pipeline(pipeline, registry)
                                         + pipeline_warnings(pipeline, registry))]
        events.emit("validation", stage="wire", valid=not problems, ok=not problems,
                    attempt=attempts[0], problems=problems)
        return problems

    user = f"Task:\n{intent}\n\nBlocks:\n" + "\n".join(_describe(b) for b in blocks)
    answer = await llm.ask("wire", SYSTEM, user, SCHEMA, check=check, repairs=1)
    pipeline = {"id": _slug(answer.get("id") or answer.get("name") or intent),
                "name": answer.get("name") or "", "user_prompt": intent,
                "nodes": answer["nodes"], "edges": answer.get("edges") or [],
                "memory_keys": answer.get("memory_keys") or []}
    if answer.get("inputs"):
        pipeline["inputs"] = answer["inputs"]
    return pipeline
