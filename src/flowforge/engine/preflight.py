"""The workflows a workflow runs, checked before it runs any block.

A nested workflow (`type: workflow`, or an agent's `tools: [{workflow: ...}]`)
is found by its reference only when its block starts: a child file that is
gone, a stored child deleted or changed since the parent was saved, a child
model whose key is missing would fail the run after earlier blocks ran and
spent.  `nested_problems` resolves each reference as the run will (the same
resolver: files, registered ids, a user's stored workflows) and asks `check`
about each child, so `flowforge validate`, a server's save and a run's start
find the same problems, each located in the child and naming the parent
block that uses it (`greeter.yaml: blocks[1].with.model: ... (used by
parent.yaml blocks[0] 'greet')`)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Awaitable, Callable

from flowforge.errors import CapabilityDenied, FlowforgeError, Problem, ValidationFailed, \
    WorkflowError
from flowforge.workflow.graph import CompiledWorkflow
from flowforge.workflow.model import nested_input_problems

__all__ = ["nested_problems", "ChildCheck"]

#: a child -> its problems (located in the child)
ChildCheck = Callable[[CompiledWorkflow], "list[Problem] | Awaitable[list[Problem]]"]


async def nested_problems(compiled: CompiledWorkflow, resolve: Callable[[str, Any], Any],
                          check: ChildCheck, *, depth: int = 8,
                          _within: frozenset[tuple[str, str]] | None = None) -> list[Problem]:
    """Every workflow `compiled` runs, however deep (to `depth` levels),
    resolved with `resolve(reference, referring source)` (sync or async; None:
    not checked here) and
    checked with `check`; a `workflow` block's `inputs` are checked against
    what the child declares.  A reference that cannot be resolved is a problem at
    the referring block; a document that includes itself is checked once (the
    run limits how deep it goes)."""
    if _within is None:
        _within = frozenset({_key(compiled)})
    if depth <= 0:
        return []
    problems: list[Problem] = []
    label = compiled.source.name if compiled.source is not None else f"'{compiled.id}'"
    for where, spec, reference in compiled.workflow_references:
        used_by = f"(used by {label} {where.rpartition('.with')[0]} '{spec.id}')"
        try:
            child = resolve(reference, compiled.source)
            if inspect.isawaitable(child):
                child = await child
            if child is None:                  # left to the run by the resolver
                continue
        except (ValidationFailed, CapabilityDenied) as exc:
            problems.extend(_in_child(reference, p, used_by) for p in exc.problems)
            continue
        except WorkflowError as exc:
            at = f"{exc.where}: " if exc.where else ""
            problems.append(Problem(where, f"{at}{exc.message}"))
            continue
        except FlowforgeError as exc:       # NotFound: no such file, id or stored workflow
            problems.append(Problem(where, str(exc)))
            continue
        key = _key(child)
        if key in _within:
            continue
        if where.endswith(".with.workflow"):        # a tool's arguments come from the model
            problems.extend(nested_input_problems(child.doc, spec.with_.get("inputs"),
                                                  f"{where[:-len('workflow')]}inputs",
                                                  reference))
        found = check(child)
        if inspect.isawaitable(found):
            found = await found
        found = [*found, *await nested_problems(child, resolve, check, depth=depth - 1,
                                                _within=_within | {key})]
        problems.extend(_in_child(reference, p, used_by) for p in found)
    return problems


def _key(compiled: CompiledWorkflow) -> tuple[str, str]:
    """The same document however its path was spelt (a stored one: by its id)."""
    source = compiled.source
    return (str(Path(source).resolve()) if source is not None else "", compiled.id)


def _in_child(reference: str, problem: Problem, used_by: str) -> Problem:
    return Problem(f"{reference}: {problem.where}" if problem.where else reference,
                   f"{problem.message} {used_by}")
