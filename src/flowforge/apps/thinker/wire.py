"""Wire: the model assembles the Pipeline JSON from the blocks at hand.

The answer is validated by the engine's own validator (through
`formats.pipeline_json.validate_pipeline`: every reference resolvable, every
required input supplied, no cycle, every `{{nX.field}}` a declared output of
a fitting type) and may only use the blocks it was given.  Invalid wiring
is fed back once, with every problem located.

A local model writes under `grammar_for(blocks)`: node k is `nk` running the
k-th block of the plan, every input it requires is given (optional ones keep
their defaults), as a run input
`{{input.name}}`, an output of an earlier node of a fitting type, or a
constant of a type other than text; the edges are then read from those
references.  So it cannot name a block it was not given, leave an input out or
read an output that does not exist.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.registry import BlockDefinition, Registry
from flowforge.formats.pipeline_json import pipeline_warnings, validate_pipeline
from flowforge.apps.thinker.events import BuildEvents
from flowforge.apps.thinker.llm import ThinkerLLM

__all__ = ["wire", "SCHEMA", "grammar_for", "reference_edges"]

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


# `[.]`, not `\\.`: a backslash before a dot is no escape in a llama.cpp grammar
_INPUT_REFERENCE = r"^\{\{input[.][a-z][a-z0-9_]*\}\}$"


def _kinds(schema: Any) -> set[str]:
    kind = schema.get("type") if isinstance(schema, dict) else None
    kinds = set(kind if isinstance(kind, list) else [kind] if kind else [])
    return kinds | {"integer"} if "number" in kinds else kinds


def _value(needed: dict[str, Any], earlier: list[tuple[str, BlockDefinition]]) -> dict[str, Any]:
    """What one input may be: a run input, an earlier node's output of a fitting type
    (every output when either side has no type), or a constant that is not text."""
    wanted = _kinds(needed)
    outputs = [f"{{{{{node}.{name}}}}}" for node, block in earlier
               for name, schema in (block.output_schema.get("properties") or {}).items()
               if re.fullmatch(r"[A-Za-z0-9_]+", name)
               and (not wanted or not _kinds(schema) or wanted & _kinds(schema))]
    choices: list[dict[str, Any]] = [{"type": "string", "pattern": _INPUT_REFERENCE}]
    if outputs:
        choices.insert(0, {"enum": outputs})
    constant = sorted(wanted - {"string", "object", "array"})
    if constant:
        choices.append({"type": constant[0] if len(constant) == 1 else constant})
    return choices[0] if len(choices) == 1 else {"anyOf": choices}


def grammar_for(blocks: list[BlockDefinition]) -> dict[str, Any]:
    """The schema a local model wires `blocks` under (module docstring)."""
    nodes, earlier = [], []
    for index, block in enumerate(blocks, 1):
        declared = block.input_schema.get("properties") or {}
        # the inputs it requires (all when it names none): an optional one wired to
        # `{{input.top}}` became a run input every user had to pass
        needed = [n for n in block.input_schema.get("required") or [] if n in declared] \
            or list(declared)
        properties = {name: _value(declared[name] if isinstance(declared[name], dict) else {},
                                   earlier) for name in needed}
        nodes.append({"type": "object", "properties": {
            "id": {"const": f"n{index}"}, "block_id": {"const": block.id},
            "inputs": {"type": "object", "properties": properties,
                       "required": list(properties)}},
            "required": ["id", "block_id", "inputs"]})
        earlier.append((f"n{index}", block))
    return {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
        "name": {"type": "string"},
        "nodes": {"type": "array", "prefixItems": nodes, "minItems": len(nodes),
                  "maxItems": len(nodes)},
        "edges": {"type": "array", "maxItems": 0, "items": SCHEMA["properties"]["edges"]["items"]}},
        "required": ["id", "name", "nodes", "edges"]}


def reference_edges(nodes: list[dict[str, Any]]) -> list[dict[str, str]]:
    """An edge for every `{{nX...}}` a node reads from another node, in order, once."""
    ids = {str(node.get("id")) for node in nodes}
    edges: list[dict[str, str]] = []
    for node in nodes:
        text = json.dumps(node.get("inputs") or {})
        for source in dict.fromkeys(re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\.", text)):
            if source in ids and source != node.get("id"):
                edges.append({"from": source, "to": str(node.get("id"))})
    return edges


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
    grammar = grammar_for(blocks)

    def prepare(value: Any) -> Any:
        # under the local grammar the edges are the references (it writes none)
        if llm.local and isinstance(value, dict) and isinstance(value.get("nodes"), list) \
                and not value.get("edges"):
            value["edges"] = reference_edges([n for n in value["nodes"] if isinstance(n, dict)])
        return value

    answer = await llm.ask("wire", SYSTEM, user, SCHEMA, check=check, repairs=1,
                           prepare=prepare, grammar=grammar)
    pipeline = {"id": _slug(answer.get("id") or answer.get("name") or intent),
                "name": answer.get("name") or "", "user_prompt": intent,
                "nodes": answer["nodes"], "edges": answer.get("edges") or [],
                "memory_keys": answer.get("memory_keys") or []}
    if answer.get("inputs"):
        pipeline["inputs"] = answer["inputs"]
    return pipeline
