"""`loop`: run child blocks repeatedly — over a list (`for_each`), a number
of `times`, or `until` an expression holds (checked after each pass, with a
`max_iterations` cap so a loop always ends).

A loop does all it says or fails saying what stopped it: `for_each` runs
every item and `times` every pass.  A `max_iterations` smaller than the list
(or than `times`) fails the block before the work, naming both, and with
`until` it fails when the cap is reached with items left and `until` still
false.  (Once a default cap of 10 cut a list of 12 to 10 passes and the run
succeeded.)  Only a loop driven by `until` alone stops quietly at its cap,
10 passes unless set: that cap is its documented end.

Children see `{{loop.index}}` (from 0), `{{loop.item}}` and
`{{loop.previous.<child>...}}` (the previous pass's outputs).  The output is
the last pass's child outputs by id, plus `iterations` (every pass's child
outputs, in order) and `count` (passes run).  A child failure fails the loop."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from flowforge.blocks._passes import pass_cap, too_many
from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import Problem, RunError
from flowforge.workflow import expressions
from flowforge.workflow.model import BlockSpec


class LoopConfig(BlockConfig):
    for_each: Any = None
    """A list (usually a template such as `{{input.items}}`) to iterate over."""
    times: int | None = Field(None, ge=0)
    """Run the children this many times."""
    until: str | None = None
    """Expression checked after each pass; the loop stops once it is true."""
    max_iterations: int | None = Field(None, ge=1, le=100_000)
    """Upper bound on passes. With `until` alone the loop ends quietly at it (10 unless
    set); with `for_each` or `times`, a list or count larger than it fails the block
    instead of being cut."""

    @model_validator(mode="after")
    def _one_driver(self) -> "LoopConfig":
        if self.for_each is None and self.times is None and self.until is None:
            raise ValueError("a loop needs `for_each`, `times` or `until`")
        return self


@register_block
class LoopBlock(BlockType):
    type_name = "loop"
    Config = LoopConfig
    outputs = {
        "iterations": Output("list", "Every pass's child outputs (by child id), in order."),
        "count": Output("integer", "How many passes ran."),
    }
    more_outputs = ("Each child block's output from the last pass, by the child's id "
                    "(`{{refine.judge.score}}`).")
    container = True
    holds_slot = False
    raw_fields = frozenset({"until"})

    @classmethod
    def expressions(cls, spec: BlockSpec) -> list[tuple[str, str]]:
        until = spec.with_.get("until")
        return [("until", until)] if isinstance(until, str) else []

    @classmethod
    def scope_names(cls, spec: BlockSpec) -> set[str]:
        return {"loop"}

    @classmethod
    def output_fields(cls, spec: BlockSpec, doc: Any) -> set[str] | None:
        return {child.id for child in spec.blocks or []} | {"iterations", "count"}

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        until = spec.with_.get("until")
        if isinstance(until, str):
            try:
                expressions.compile_expression(until)
            except expressions.ExpressionError as exc:
                return [Problem(f"{where}.with.until", str(exc))]
        limit, items, times = (spec.with_.get(key) for key in ("max_iterations", "for_each",
                                                               "times"))
        written = [(len(items), "for_each", "items")] if isinstance(items, list) else []
        if isinstance(times, int) and not isinstance(times, bool):
            written.append((times, "times", "passes"))
        if isinstance(limit, int) and written and until is None and min(written)[0] > limit:
            count, driver, what = min(written)
            return [Problem(f"{where}.with.max_iterations",
                            f"`{driver}` asks for {count} {what} but `max_iterations` is "
                            f"{limit}: the loop would stop early; raise it or remove it")]
        return []

    @classmethod
    async def run(cls, context: BlockContext, config: LoopConfig) -> Any:
        items = config.for_each
        if items is not None and not isinstance(items, (list, tuple)):
            if isinstance(items, dict):
                items = list(items.items())
            else:
                raise ValueError(f"for_each must be a list, got {type(items).__name__}")
        until = expressions.compile_expression(config.until) if config.until else None
        asked, driven = _passes(items, config)
        limit = config.max_iterations
        cut = limit is not None and driven is not None and asked > limit
        if cut and until is None:
            raise _cut(context, driven, asked, limit)
        passes = asked if limit is None else min(asked, limit)
        cap = pass_cap(context)
        if cap is not None and passes > cap:
            if until is None:                  # the count is known: refuse before the work
                raise too_many(context, passes, "passes")
            passes = cap + 1                   # `until` may hold before the cap

        iterations: list[dict[str, Any]] = []
        previous: dict[str, Any] | None = None
        for index in range(passes):
            if cap is not None and index == cap:
                raise too_many(context, f"more than {cap}", "passes (`until` still false)")
            loop_scope = {"index": index, "previous": previous, "iteration": index + 1,
                          "item": items[index] if items is not None else None,
                          "items": items}
            outcome = await context.run_children(
                context.node.children, {"loop": loop_scope}, f"{context.block_id}[{index}]")
            if outcome.failed:
                detail = "; ".join(f"{cid}: {err}" for cid, err in outcome.errors.items())
                raise RunError(f"pass {index} failed: {detail}")
            previous = outcome.outputs
            iterations.append(outcome.outputs)
            if until is not None:
                scope = {**context.scope, **outcome.outputs, "loop": loop_scope}
                if until.evaluate(scope):
                    break
        else:
            if cut:                            # the cap came before the list's end
                raise _cut(context, driven, asked, limit, until_false=True)
        return {**(previous or {}), "iterations": iterations, "count": len(iterations)}


def _passes(items: Any, config: LoopConfig) -> tuple[int, str | None]:
    """How many passes the loop's drivers ask for, and which driver set it
    (None for `until` alone, which only `max_iterations` bounds)."""
    counts = []
    if items is not None:
        counts.append((len(items), "for_each"))
    if config.times is not None:
        counts.append((config.times, "times"))
    if not counts:
        return (config.max_iterations or 10), None
    return min(counts)


def _cut(context: BlockContext, driven: str, count: int, limit: int,
         until_false: bool = False) -> RunError:
    what = f"{count} items" if driven == "for_each" else f"{count} passes"
    when = (f"`until` was still false after {limit} passes"
            if until_false else "it would stop early")
    return RunError(f"loop '{context.block_id}': `{driven}` asks for {what} but "
                    f"`max_iterations` is {limit}, and {when}: raise `with.max_iterations` "
                    f"to at least {count} (or remove it), or shorten the list; a loop never "
                    f"drops items")
