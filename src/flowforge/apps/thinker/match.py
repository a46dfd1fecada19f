"""Search: each required block looked up in the registry.

A candidate matches only if it also fits: the same execution type, every
input it requires is one the plan provides, and every output the plan
expects is one it declares (by field name, with compatible types).  A block
whose id equals the required name is checked first; otherwise the registry's
search (hybrid or text) proposes candidates from the description and
use_when.  Returns the matched and the missing lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowforge.registry import BlockDefinition, Registry
from flowforge.apps.thinker.decompose import RequiredBlock
from flowforge.apps.thinker.events import BuildEvents

__all__ = ["Match", "search_blocks", "fit_problems"]


@dataclass
class Match:
    required: RequiredBlock
    block: BlockDefinition
    score: float


def _types(schema: Any) -> set[str]:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind is None:
        return set()
    found = set(kind if isinstance(kind, list) else [kind])
    if "number" in found:
        found.add("integer")
    return found


def fit_problems(required: RequiredBlock, candidate: BlockDefinition) -> list[str]:
    """Why `candidate` cannot stand in for `required` (empty when it can)."""
    problems = []
    if candidate.execution_type != required.execution_type:
        problems.append(f"it is a {candidate.execution_type} block, not {required.execution_type}")
    offered = required.input_schema.get("properties") or {}
    for name in candidate.input_schema.get("required") or []:
        if name not in offered:
            problems.append(f"it needs input '{name}', which the plan does not provide")
    declared = candidate.output_schema.get("properties") or {}
    for name, schema in (required.output_schema.get("properties") or {}).items():
        if name not in declared:
            problems.append(f"it has no output '{name}'")
        elif _types(schema) and _types(declared[name]) and \
                not (_types(schema) & _types(declared[name])):
            problems.append(f"its output '{name}' is {declared[name].get('type')}, not "
                            f"{schema.get('type')}")
    return problems


async def search_blocks(required: list[RequiredBlock], registry: Registry,
                        events: BuildEvents) -> tuple[list[Match], list[RequiredBlock]]:
    events.stage("search")
    matched, missing = [], []
    for need in required:
        candidates: list[tuple[BlockDefinition, float]] = []
        exact = await registry.find(need.name)
        if exact is not None:
            candidates.append((exact, 1.0))
        for hit in await registry.search(f"{need.description} {need.use_when}", limit=5,
                                         execution_type=need.execution_type):
            if hit.definition.id != need.name:
                candidates.append((hit.definition, hit.score))
        reasons = {}
        for candidate, score in candidates:
            problems = fit_problems(need, candidate)
            if not problems:
                matched.append(Match(need, candidate, score))
                events.emit("search_found", suggested_id=need.name, required=need.name,
                            block_id=candidate.id, version=candidate.version, score=score)
                break
            reasons[candidate.id] = problems
        else:
            missing.append(need)
            events.emit("search_missing", suggested_id=need.name, required=need.name,
                        candidates={k: v for k, v in list(reasons.items())[:3]})
    events.stage_result("search", matched=[m.block.id for m in matched],
                        missing=[m.name for m in missing],
                        next="create" if missing else "wire")
    return matched, missing
