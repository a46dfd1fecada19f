"""`condition`: ordered cases, the first whose expression is true wins, else
`default`. Activates exactly one outgoing edge (or none when nothing matches
and there is no default); every other target is skipped, and the skip
propagates.  A `goto` target needs no `after:`; the edge is implied."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output, Routed
from flowforge.blocks.type_table import register_block
from flowforge.errors import Problem
from flowforge.workflow import expressions
from flowforge.workflow.model import BlockSpec


class Case(BaseModel):
    """One branch: when `when` is true, go to `goto`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    when: str
    """Expression, e.g. `grade.accuracy >= 8 and not review.flagged`."""
    goto: str
    """Id of the block to run when the expression is true."""


class ConditionConfig(BlockConfig):
    cases: list[Case]
    """Checked in order; the first true one wins."""
    default: str | None = None
    """Block to run when no case is true (none: every target is skipped)."""


@lru_cache(maxsize=4096)
def _compiled(source: str) -> expressions.Expression:
    return expressions.compile_expression(source)


@register_block
class ConditionBlock(BlockType):
    type_name = "condition"
    pure = True                  # nothing outside the run sees it run
    Config = ConditionConfig
    outputs = {
        "selectedPath": Output("{blockId, blockType, blockTitle} or null",
                               "The block chosen; null when no case matched and there is no "
                               "`default`."),
        "selectedCase": Output("integer or `default`", "The position of the case that "
                               "matched (from 0), or `default`."),
        "conditionResult": Output("boolean", "True when a case matched (not the default)."),
    }
    routes = True
    raw_fields = frozenset({"cases"})

    @classmethod
    def implied_targets(cls, spec: BlockSpec) -> list[str]:
        targets = [case.get("goto") for case in spec.with_.get("cases") or []
                   if isinstance(case, dict) and isinstance(case.get("goto"), str)]
        default = spec.with_.get("default")
        if isinstance(default, str):
            targets.append(default)
        return list(dict.fromkeys(targets))

    @classmethod
    def expressions(cls, spec: BlockSpec) -> list[tuple[str, str]]:
        return [(f"cases[{index}].when", case["when"])
                for index, case in enumerate(spec.with_.get("cases") or [])
                if isinstance(case, dict) and isinstance(case.get("when"), str)]

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        cases = spec.with_.get("cases")
        if isinstance(cases, list) and not cases:
            return [Problem(f"{where}.with.cases", "a condition needs at least one case")]
        return []

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        return True

    @classmethod
    async def run(cls, context: BlockContext, config: ConditionConfig) -> Any:
        return cls.run_now(context, config)

    @classmethod
    def run_now(cls, context: BlockContext, config: ConditionConfig) -> Any:
        chosen, index = config.default, "default"
        scope = context.scope
        for position, case in enumerate(config.cases):
            if _compiled(case.when).evaluate(scope):
                chosen, index = case.goto, position
                break
        selected = None
        if chosen is not None:
            target = next((node for node in context.successors() if node.id == chosen), None)
            selected = {"blockId": chosen, "blockType": target.type if target else None,
                        "blockTitle": target.name if target else chosen}
        output = {"selectedPath": selected, "selectedCase": index,
                  "conditionResult": index != "default"}
        return Routed(output, (chosen,) if chosen else ())
