"""Pipeline JSON (what the thinker writes) <-> workflow documents.

    {"id": "paper-digest", "name": "Paper digest", "user_prompt": "...",
     "nodes": [{"id": "n1", "block_id": "http_fetch", "inputs": {"url": "{{input.url}}"}},
               {"id": "n2", "block_id": "llm_summarise", "inputs": {"text": "{{n1.text}}"}}],
     "edges": [{"from": "n1", "to": "n2"}],
     "memory_keys": []}

A Pipeline is a workflow whose blocks are all registry blocks: each node
becomes `{id, uses: block_id, with: inputs}`, each edge an `after:`, memory
keys the workflow's `memory:`; run inputs are the `{{input.X}}` the nodes
read (typed from the block's input schema when a whole value is one
reference), unless the pipeline lists `inputs` itself.  So the engine's own
validator checks it (every reference resolvable, every required input
supplied, no cycle) and the engine runs it: the Doer is the engine.  On top
of that, `validate_pipeline` checks each `{{nX.field}}` against nX's output
schema, because a typo there would otherwise only be a None at run time.

It lives in the formats room (`FORMAT`, name `pipeline`: loading and
`flowforge import` reach it through `flowforge.formats.room`); the thinker
validates its own wiring with it, and `service.pipeline` runs it
(`run_pipeline`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flowforge.blocks.type_table import block_types
from flowforge.errors import Problem, ValidationFailed, WorkflowError
from flowforge.formats.base import Imported, ImportReport, NodeReport
from flowforge.registry import BlockDefinition, Registry, get_registry, use_registry
from flowforge.workflow.compile import compile_workflow
from flowforge.workflow.loader import document_from_data
from flowforge.workflow.templates import TEMPLATE_RE, parse_path

__all__ = ["Pipeline", "PipelineNode", "PipelineEdge", "pipeline_to_workflow",
           "workflow_to_pipeline", "validate_pipeline", "pipeline_warnings", "is_pipeline",
           "FORMAT", "PipelineFormat"]

_ID_RE = re.compile(r"[^A-Za-z0-9_\-]+")


class PipelineNode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")
    block_id: str
    """A registry block id (`name@version` pins a version)."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """The block's inputs; `{{n1.field}}`, `{{input.x}}`, `{{memory.k}}` allowed."""


class PipelineEdge(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str = Field(alias="from")
    to: str


class Pipeline(BaseModel):
    """The thinker's output, AgentFlow's format."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str = ""
    user_prompt: str = ""
    nodes: list[PipelineNode]
    edges: list[PipelineEdge] = Field(default_factory=list)
    memory_keys: list[str] = Field(default_factory=list)
    inputs: dict[str, dict[str, Any]] | None = None
    """Run inputs as JSON Schema properties; inferred from `{{input.X}}` when absent."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def is_pipeline(data: Any) -> bool:
    return isinstance(data, dict) and "nodes" in data and "blocks" not in data


def _as_pipeline(data: Pipeline | dict[str, Any]) -> Pipeline:
    if isinstance(data, Pipeline):
        return data
    try:
        return Pipeline.model_validate(data)
    except ValidationError as exc:
        raise ValidationFailed([Problem(".".join(str(p) for p in e["loc"]).replace("from_", "from"),
                                        e["msg"]) for e in exc.errors()]) from None


def _references(value: Any) -> list[tuple[str, ...]]:
    if isinstance(value, str):
        return [parse_path(m.group(1)) for m in TEMPLATE_RE.finditer(value)]
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _references(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _references(item)]
    return []


def _whole_reference(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        match = TEMPLATE_RE.fullmatch(value.strip())
        if match:
            return parse_path(match.group(1))
    return None


def _infer_inputs(pipeline: Pipeline, registry: Registry) -> dict[str, dict[str, Any]]:
    inputs: dict[str, dict[str, Any]] = {}
    for node in pipeline.nodes:
        definition = _definition(registry, node.block_id)
        properties = (definition.input_schema.get("properties") or {}) if definition else {}
        for name, value in node.inputs.items():
            whole = _whole_reference(value)
            for ref in _references(value):
                if len(ref) < 2 or ref[0] != "input" or ref[1] in inputs:
                    continue
                schema = properties.get(name) if whole == ref else None
                typed = {k: v for k, v in (schema or {}).items()
                         if k in ("type", "items", "description", "enum")}
                inputs[ref[1]] = typed or {"type": "string"}
    return inputs


def _definition(registry: Registry, block_id: str) -> BlockDefinition | None:
    """The definition a node names (converting is synchronous: `Registry.now`)."""
    name, _, version = block_id.partition("@")
    return registry.now.find(name, int(version) if version.isdigit() else None)


def pipeline_to_workflow(data: Pipeline | dict[str, Any],
                         registry: Registry | None = None) -> dict[str, Any]:
    """The workflow document (a dict) that runs this pipeline."""
    pipeline = _as_pipeline(data)
    registry = registry or get_registry()
    incoming: dict[str, list[str]] = {}
    for edge in pipeline.edges:
        incoming.setdefault(edge.to, []).append(edge.from_)
    workflow_id = _ID_RE.sub("-", pipeline.id).strip("-") or "pipeline"
    if not re.match(r"^[A-Za-z_]", workflow_id):
        workflow_id = f"p-{workflow_id}"
    blocks = []
    for node in pipeline.nodes:
        block: dict[str, Any] = {"id": node.id, "uses": node.block_id, "with": dict(node.inputs)}
        if node.id in incoming:
            block["after"] = list(dict.fromkeys(incoming[node.id]))
        blocks.append(block)
    return {"version": 1, "id": workflow_id, "name": pipeline.name or pipeline.id,
            "description": pipeline.user_prompt or None,
            "inputs": pipeline.inputs if pipeline.inputs is not None
            else _infer_inputs(pipeline, registry),
            "memory": list(pipeline.memory_keys), "blocks": blocks}


def workflow_to_pipeline(doc: dict[str, Any]) -> dict[str, Any]:
    """A workflow made only of `uses:` blocks, as Pipeline JSON."""
    nodes, edges = [], []
    for index, block in enumerate(doc.get("blocks") or []):
        if not block.get("uses") or block.get("type") not in (None, "registry"):
            raise WorkflowError("only registry blocks (`uses:`) can be written as a pipeline",
                                where=f"blocks[{index}]")
        nodes.append({"id": block["id"], "block_id": block["uses"],
                      "inputs": dict(block.get("with") or {})})
        after = block.get("after") or []
        if isinstance(after, dict):          # {all: [...], any: [...]}: a pipeline's edges are plain
            after = [*(after.get("all") or []), *(after.get("any") or [])]
        for source in [after] if isinstance(after, str) else after:
            edges.append({"from": source, "to": block["id"]})
    return {"id": doc["id"], "name": doc.get("name") or doc["id"],
            "user_prompt": doc.get("description") or "", "nodes": nodes, "edges": edges,
            "memory_keys": list(doc.get("memory") or []), "inputs": doc.get("inputs") or {}}


def _to_pipeline_place(where: str, pipeline: Pipeline) -> str:
    """`blocks[1].with.text` -> `nodes[1].inputs.text`."""
    where = re.sub(r"^blocks\[(\d+)\]\.with", r"nodes[\1].inputs", where)
    where = re.sub(r"^blocks\[(\d+)\]\.uses", r"nodes[\1].block_id", where)
    return re.sub(r"^blocks\[(\d+)\]", r"nodes[\1]", where)


def validate_pipeline(data: Pipeline | dict[str, Any],
                      registry: Registry | None = None) -> list[Problem]:
    """Every problem of the pipeline, located in its own terms; empty when valid."""
    try:
        pipeline = _as_pipeline(data)
    except ValidationFailed as exc:
        return exc.problems
    registry = registry or get_registry()
    problems: list[Problem] = []
    ids = [node.id for node in pipeline.nodes]
    if not pipeline.nodes:
        problems.append(Problem("nodes", "a pipeline needs at least one node"))
    for index, edge in enumerate(pipeline.edges):
        for end, node_id in (("from", edge.from_), ("to", edge.to)):
            if node_id not in ids:
                problems.append(Problem(f"edges[{index}].{end}", f"unknown node '{node_id}'; "
                                        f"nodes: {', '.join(ids)}"))
    if problems:
        return problems
    try:
        with use_registry(registry):
            document = document_from_data(pipeline_to_workflow(pipeline, registry), "pipeline")
            compile_workflow(document, block_types(), missing_outputs="warning")
    except ValidationFailed as exc:
        problems += [Problem(_to_pipeline_place(p.where, pipeline), p.message)
                     for p in exc.problems]
    except WorkflowError as exc:
        problems.append(Problem(_to_pipeline_place(exc.where, pipeline), exc.message))
    problems += _output_field_problems(pipeline, registry)[0]
    return problems


def pipeline_warnings(data: Pipeline | dict[str, Any],
                      registry: Registry | None = None) -> list[Problem]:
    """What is allowed but likely a mistake: `{{n1.field}}` naming no declared
    output of n1 (the seed's format resolves it to None, so it is not refused)."""
    try:
        pipeline = _as_pipeline(data)
    except ValidationFailed:
        return []
    return _output_field_problems(pipeline, registry or get_registry())[1]


def _output_field_problems(pipeline: Pipeline, registry: Registry
                           ) -> tuple[list[Problem], list[Problem]]:
    """`{{n1.field}}` should name a declared output of n1 (else a warning) and
    must be of a fitting type (else a problem): (problems, warnings)."""
    by_id = {node.id: _definition(registry, node.block_id) for node in pipeline.nodes}
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for index, node in enumerate(pipeline.nodes):
        consumer = by_id.get(node.id)
        wanted = (consumer.input_schema.get("properties") or {}) if consumer else {}
        for name, value in node.inputs.items():
            whole = _whole_reference(value)
            for ref in _references(value):
                source = by_id.get(ref[0])
                if source is None or len(ref) < 2:
                    continue
                outputs = source.output_schema.get("properties") or {}
                if ref[1] not in outputs:
                    if outputs and source.output_schema.get("additionalProperties") is not True:
                        warnings.append(Problem(
                            f"nodes[{index}].inputs.{name}",
                            f"'{ref[0]}' ({source.id}) has no output '{ref[1]}'; its outputs: "
                            f"{', '.join(outputs)}"))
                    continue
                if whole == ref and len(ref) == 2:
                    given, needed = outputs[ref[1]].get("type"), (wanted.get(name) or {}).get(
                        "type")
                    if _incompatible(given, needed):
                        problems.append(Problem(
                            f"nodes[{index}].inputs.{name}",
                            f"'{{{{{'.'.join(ref)}}}}}' is {given} but input '{name}' of "
                            f"{node.block_id} needs {needed}"))
    return problems, warnings


def _incompatible(given: Any, needed: Any) -> bool:
    if not given or not needed:
        return False
    given_set = set(given if isinstance(given, list) else [given])
    needed_set = set(needed if isinstance(needed, list) else [needed])
    if "number" in needed_set:
        needed_set.add("integer")
    return not (given_set & needed_set)


#: the keys a Pipeline may have: a mapping of only these with `nodes` is one
_KEYS = frozenset(Pipeline.model_fields) | {"edges"}


class PipelineFormat:
    """AgentFlow's Pipeline JSON as a format of the room: every node becomes a
    registry block (`uses:`), so every node has a counterpart."""

    name = "pipeline"
    title = "Pipeline JSON (AgentFlow)"

    def detect(self, data: Any) -> bool:
        """`nodes` and no `blocks`, and either only a Pipeline's keys or a node
        naming a `block_id` (other formats with `nodes` carry keys of their own:
        n8n's `connections`, Flowise's `viewport`)."""
        if not is_pipeline(data) or not isinstance(data["nodes"], list):
            return False
        if any(isinstance(node, dict) and isinstance(node.get("data"), dict)
               for node in data["nodes"]):
            return False      # a canvas node (Flowise, Langflow): a Pipeline node has no `data`
        return set(data) <= _KEYS or any(isinstance(node, dict) and "block_id" in node
                                         for node in data["nodes"])

    def convert(self, data: Any, *, source: str) -> Imported:
        try:
            pipeline = _as_pipeline(data)
        except ValidationFailed as exc:
            raise ValidationFailed(exc.problems, source=source) from None
        report = ImportReport(self.name, [NodeReport(node.id, "", node.block_id, "registry")
                                          for node in pipeline.nodes])
        return Imported(pipeline_to_workflow(pipeline), report)


FORMAT = PipelineFormat()
