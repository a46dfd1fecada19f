"""Run one block of a workflow by itself: the editor's "Test this block".

What the block reads is what the compile step found (`Node.reads`: each
template and expression reference in its `with`): the workflow's inputs,
variables and memory, a loop's `loop.*`, other blocks' outputs.  The caller
gives values for them (`samples`), or names a past run whose stored inputs
and block outputs fill what the samples leave out; a reference that nothing
fills is refused, each one named, before anything runs.  Variables come
from the document and memory from the user's stored memory unless a sample
replaces them (memory never written back).

The block then runs on a `Run` set up as every run of the user is
(`new_run`: their policy, secrets, shared keys, budget and limits), after
the same policy gate (`check_policy`) and the same check of its models, by
`engine.alone.run_alone`: the same block code, and no other block.
Nothing is stored (no run row, no events): the answer carries the block's
output or error, the requests as sent to the model (rebuilt from the run's
`llm_request` events by `sent_requests`), tokens and time, with every value
a run hides (secrets, shared keys, environment values) as `***`.

Blocks that mean something only inside a run (containers, approvals and
waits, nested workflows) are refused, saying what to do instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowforge.blocks import sent_requests
from flowforge.engine.alone import run_alone
from flowforge.engine.inputs import validate_inputs
from flowforge.errors import InvalidValue, Problem
from flowforge.service.new_run import hidden_values, new_run
from flowforge.service.recorder import redactor
from flowforge.workflow.graph import NAMESPACES, CompiledWorkflow, Graph, Node
from flowforge.workflow.policy import Policy, check_policy
from flowforge.workflow.templates import normalize_name

__all__ = ["BlockTestRefused", "Read", "block_reads", "describe_block", "samples_from_run",
           "merge_samples", "run_one_block", "SAMPLE_SECTIONS"]

#: What a request's `samples` may hold, as the template namespaces name them
#: (`blocks`: other blocks' outputs by id).
SAMPLE_SECTIONS = ("input", "vars", "memory", "loop", "blocks")

#: Why a block of these types cannot run alone, and what to do instead.
_NOT_ALONE = {
    "approval": "an approval waits for a person's decision, which only a run can receive: "
                "run the workflow (its run waits for the decision), or test the blocks after it "
                "with a sample decision as their input",
    "wait": "a wait block pauses a run until a time, which only a run can resume: run the "
            "workflow, or test the blocks after it",
    "workflow": "a workflow block runs another whole workflow: open that workflow and test "
                "its blocks, or run the workflow",
}


#: Events the answer carries in other fields (`requests`, `output`), or only as noise.
_SAID = frozenset({"llm_delta", "llm_request", "llm_response", "block_succeeded"})


class BlockTestRefused(InvalidValue):
    """A block test that cannot start: the block cannot run alone, or values it
    reads are missing (`problems`, each located under `samples`)."""

    def __init__(self, message: str, problems: list[Problem] | None = None,
                 code: str = "cannot_test_block") -> None:
        super().__init__(message)
        self.problems = list(problems or [])
        self.code = code


@dataclass(frozen=True)
class Read:
    """One value a block reads: `source` is `input`, `vars`, `memory`, `loop` or
    `block`; `name` the input, variable, key or loop field, or the block's id;
    `field` a block output's top-level field (None: the whole output)."""

    source: str
    name: str
    field: str | None = None

    @property
    def reference(self) -> str:
        root = self.name if self.source == "block" else f"{self.source}.{self.name}"
        return root if self.field is None else f"{root}.{self.field}"

    def view(self) -> dict[str, Any]:
        return {"reference": self.reference, "source": self.source, "name": self.name,
                "field": self.field}


def _locate(graph: Graph, block_id: str, outer: tuple[Graph, ...] = ()
            ) -> tuple[Graph, Node, tuple[Graph, ...]] | None:
    """The graph holding `block_id`, its node, and the graphs around it (innermost first)."""
    node = graph.nodes.get(block_id)
    if node is not None:
        return graph, node, outer
    for candidate in graph.nodes.values():
        if candidate.children is not None:
            found = _locate(candidate.children, block_id, (graph, *outer))
            if found is not None:
                return found
    return None


def _find(compiled: CompiledWorkflow, block_id: str) -> tuple[Graph, Node, tuple[Graph, ...]]:
    found = _locate(compiled.graph, block_id)
    if found is None:
        raise BlockTestRefused(f"the workflow '{compiled.id}' has no block '{block_id}'",
                               [Problem("block_id", "name a block of the document by its id")],
                               code="no_such_block")
    return found


def _why_not_alone(node: Node) -> str | None:
    if node.info.container:
        return (f"a {node.type} block runs its child blocks, which only a run does: test one "
                f"of its child blocks (give `loop.index` and `loop.item` as samples), or run "
                f"the workflow")
    return _NOT_ALONE.get(node.type)


def block_reads(compiled: CompiledWorkflow, block_id: str) -> tuple[Graph, Node, list[Read]]:
    """The block's graph and node, and each value it reads, once, in the order
    its `with` names them.  An `input` block reads every declared input."""
    graph, node, outer = _find(compiled, block_id)
    visible = [graph, *outer]
    reads: dict[Read, None] = {}
    if node.type == "input":
        reads.update(dict.fromkeys(Read("input", name) for name in compiled.doc.inputs))
    for ref in node.reads:
        root, path = ref.root, ref.path
        if root in NAMESPACES:
            if root in ("input", "vars", "memory", "loop") and len(path) > 1:
                reads[Read(root, path[1])] = None
            continue
        target = next((names.get(root) or names.get(normalize_name(root))
                       for names in (g.names for g in visible)
                       if names.get(root) or names.get(normalize_name(root))), None)
        if target is not None and target != block_id:
            reads[Read("block", target, path[1] if len(path) > 1 else None)] = None
    return graph, node, list(reads)


def merge_samples(*layers: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Sections merged key by key, a later layer winning (a past run, then the request)."""
    merged: dict[str, dict[str, Any]] = {section: {} for section in SAMPLE_SECTIONS}
    for layer in layers:
        for section in SAMPLE_SECTIONS:
            merged[section].update((layer or {}).get(section) or {})
    return merged


async def samples_from_run(storage: Any, run_row: dict[str, Any]) -> dict[str, Any]:
    """A past run's inputs and the outputs of its top-level blocks that succeeded."""
    blocks = {row["block_id"]: row["output"] for row in await storage.get_blocks(run_row["run_id"])
              if not row.get("scope") and row.get("status") == "succeeded"}
    return {"input": dict(run_row.get("inputs") or {}), "blocks": blocks}


_ABSENT = object()


def _value(read: Read, samples: dict[str, dict[str, Any]], compiled: CompiledWorkflow) -> Any:
    """The value `read` gets from `samples` (and the document), or _ABSENT."""
    if read.source == "vars":
        return samples["vars"].get(read.name, compiled.doc.variables.get(read.name, _ABSENT))
    if read.source == "input":
        declared = compiled.doc.inputs.get(read.name) or {}
        return samples["input"].get(read.name, declared.get("default", _ABSENT))
    if read.source == "block":
        output = samples["blocks"].get(read.name, _ABSENT)
        if read.field is None or output is _ABSENT:
            return output
        return output.get(read.field, _ABSENT) if isinstance(output, dict) else _ABSENT
    return samples[read.source].get(read.name, _ABSENT)


def _missing(reads: list[Read], samples: dict[str, dict[str, Any]], compiled: CompiledWorkflow,
             block_id: str) -> list[Problem]:
    problems = []
    for read in reads:
        if read.source == "memory" or _value(read, samples, compiled) is not _ABSENT:
            continue
        if read.source == "input" and (compiled.doc.inputs.get(read.name) or {}).get("optional"):
            continue
        section = "blocks" if read.source == "block" else read.source
        key = read.reference if read.source == "block" else read.name
        problems.append(Problem(f"samples.{section}.{key}", (
            f"'{block_id}' reads {{{{{read.reference}}}}}: give it under `samples.{section}` "
            f"(or name a past run that has it, `run_id`)")))
    return problems


def describe_block(compiled: CompiledWorkflow, block_id: str,
                   samples: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the editor's test form shows: whether the block can run alone (else
    why not), and each value it reads with the value `samples` give it."""
    _, node, reads = block_reads(compiled, block_id)
    why = _why_not_alone(node)
    shown = []
    for read in reads:
        value = _value(read, samples, compiled)
        shown.append({**read.view(), **({} if value is _ABSENT else {"value": value})})
    return {"block_id": block_id, "type": node.type, "runnable": why is None, "reason": why,
            "reads": shown}


def _block_values(compiled: CompiledWorkflow, graph: Graph, reads: list[Read],
                  samples: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Scope values beside the run's namespaces: the blocks it reads, by id and
    by name (as a settled block is), `loop`, and variables a sample replaces."""
    values: dict[str, Any] = {}
    for read in reads:
        if read.source == "block" and read.name in samples["blocks"]:
            output = samples["blocks"][read.name]
            values[read.name] = output
            found = _locate(compiled.graph, read.name)
            alias = found[1].alias if found is not None else None
            if alias is not None:
                values.setdefault(alias, output)
    if samples["loop"]:
        values["loop"] = dict(samples["loop"])
    if samples["vars"]:
        values["vars"] = {**compiled.doc.variables, **samples["vars"]}
    return values


async def run_one_block(compiled: CompiledWorkflow, block_id: str,
                     samples: dict[str, dict[str, Any]], *, user: dict[str, Any],
                     storage: Any, policy: Policy, model: str | None,
                     services: dict[str, Any], secrets: dict[str, str],
                     provider_keys: dict[str, str], stored_workflows: Any,
                     budget_limits: list[Any]) -> dict[str, Any]:
    """Run `block_id` alone with `samples` (merged already: see `merge_samples`)
    under the options every run of `user` gets (`LiveRuns.run_options`).
    BlockTestRefused when it cannot run alone or a value it reads is missing;
    CapabilityDenied when the policy refuses the document; InputError when a
    sample input does not fit its declaration."""
    graph, node, reads = block_reads(compiled, block_id)
    why = _why_not_alone(node)
    if why is not None:
        raise BlockTestRefused(f"block '{block_id}' cannot run alone: {why}",
                               [Problem("block_id", why)], code="block_cannot_run_alone")
    check_policy(compiled, policy, model_override=model)          # the run's own gate
    missing = _missing(reads, samples, compiled, block_id)
    if missing:
        raise BlockTestRefused(
            f"{len(missing)} value(s) block '{block_id}' reads are missing: "
            + ", ".join(p.where.removeprefix("samples.") for p in missing),
            missing, code="missing_samples")
    read_inputs = {read.name for read in reads if read.source == "input"}
    declared = {name: spec for name, spec in compiled.doc.inputs.items() if name in read_inputs}
    given = {name: value for name, value in samples["input"].items() if name in read_inputs}
    inputs = validate_inputs(declared, given) if declared else given
    run_obj = new_run(compiled, inputs, user=user, run_id=None, model=model, concurrency=None,
                      services={**services, "storage": storage}, on_event=None, policy=policy,
                      secrets=secrets, provider_keys=provider_keys,
                      stored_workflows=stored_workflows, budget_limits=budget_limits)
    memory_keys = list(compiled.doc.memory)
    if memory_keys:
        stored = await storage.get_memory(run_obj.user.get("id"), memory_keys)
        run_obj.memory = {**stored, **{k: v for k, v in samples["memory"].items()
                                       if k in memory_keys}}
    hide = redactor(hidden_values(run_obj))
    base = {"block_id": block_id, "type": node.type}
    problems = [problem for problem in run_obj.model_problems()
                if problem.where.startswith(f"{node.where}.")
                or not problem.where.startswith("blocks[")]
    if problems:                                  # a run fails before its first block alike
        return hide({**base, "status": "failed", "output": None,
                     "error": "; ".join(str(p) for p in problems), "requests": [],
                     "tokens": {"prompt": 0, "completion": 0, "total": 0}, "cost": 0.0,
                     "duration_ms": 0.0, "events": []})
    result = await run_alone(run_obj, graph, block_id, inputs,
                             _block_values(compiled, graph, reads, samples))
    usage = result.usage or {}
    events = [event for event in result.events       # the requests and output say the rest
              if event.get("block_id") == block_id and event["type"] not in _SAID]
    return hide({**base, "status": result.status,
                 "output": result.output if result.status == "succeeded" else None,
                 "error": result.error, "requests": sent_requests(result.events, block_id),
                 "tokens": usage.get("tokens") or {"prompt": 0, "completion": 0, "total": 0},
                 "cost": usage.get("cost", 0.0), "duration_ms": result.duration_ms,
                 "events": events})
