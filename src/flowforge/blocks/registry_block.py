"""`registry`: run a block from the block registry (`uses: <block id>`).

    - id: stats
      uses: math_stats                  # or math_stats@2 for a fixed version
      with: {numbers: "{{fetch.body.values}}"}

`with` holds the registry block's inputs.  At validation time the block id
must exist, every required input must be given, no unknown input may be
given, and static values must fit their schema (validation is synchronous:
it reads the library through `Registry.now`, the sync facade over the
store's tables, so a block added a moment ago is seen; `registry.store` says
why); at run time the resolved
inputs (schema defaults filled in) and the output are always checked
against the block's schemas.  Python blocks run in the sandbox
(`flowforge.sandbox`), never in this process; LLM blocks run through the
`llm` block (their prompt template, system prompt and output schema), so
they get the same model choice, record and repair as any LLM block.

`execute_definition` and `run_examples` are the same path for callers
outside a run (the thinker testing what it wrote, `flowforge blocks test`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from pydantic import ConfigDict

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, FlowforgeError, Problem
from flowforge.hints import did_you_mean
from flowforge.providers.structured import schema_fields
from flowforge.registry import (BlockDefinition, Registry, get_registry, registry_for,
                                schema_problems)
from flowforge.sandbox import Limits, SandboxError, SandboxResult, run_python
from flowforge.workflow.model import BlockSpec
from flowforge.workflow.templates import has_templates, interpolate_value

__all__ = ["RegistryBlock", "execute_definition", "run_examples", "ExampleReport",
           "DetachedContext", "parse_uses", "BlockRunError", "python_context", "run_sandboxed"]

_USAGE_KEYS = ("content", "model", "tokens", "cost")


class BlockRunError(FlowforgeError):
    """A registry block's inputs, run or output failed; `stage` says which."""

    def __init__(self, stage: str, message: str) -> None:
        self.stage = stage
        super().__init__(message)


def parse_uses(uses: str) -> tuple[str, int | None]:
    """`math_stats@2` -> ("math_stats", 2); no `@` -> the latest version."""
    block_id, _, version = uses.partition("@")
    return block_id.strip(), int(version) if version.strip().isdigit() else None


class RegistryConfig(BlockConfig):
    """The registry block's inputs, by name (checked against its input schema)."""

    model_config = ConfigDict(extra="allow")


@dataclass
class DetachedContext:
    """A `BlockContext` for running a registry block outside a workflow run."""

    model: str | None = None
    on_event: Callable[[dict[str, Any]], None] | None = None
    block_id: str = "block"
    run_id: str = "detached"
    workflow_id: str = "detached"
    scope: Mapping[str, Any] = field(default_factory=dict)
    user: Mapping[str, Any] = field(default_factory=lambda: {"id": "default"})
    services: Mapping[str, Any] = field(default_factory=dict)
    node: Any = None
    environ: Mapping[str, str] | None = None      # None: this process's environment

    @property
    def defaults(self) -> Mapping[str, Any]:
        return {"model": self.model} if self.model else {}

    @property
    def model_override(self) -> str | None:
        return self.model

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ

    def emit(self, event_type: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event({"type": event_type, "block_id": self.block_id, **data})


def python_context(context: Any) -> dict[str, Any]:
    """What a Python block's `context` holds: the run and block ids, the user
    (`user`, `user_id`) and the user's memory as loaded for this run (read-only
    in the sandbox).  JSON only: it crosses into the sandbox process."""
    user = dict(getattr(context, "user", None) or {})
    scope = getattr(context, "scope", None) or {}
    memory = scope.get("memory") if isinstance(scope, Mapping) else None
    return {"block_id": getattr(context, "block_id", ""),
            "run_id": getattr(context, "run_id", ""),
            "workflow_id": getattr(context, "workflow_id", ""),
            "user": {k: v for k, v in user.items() if isinstance(v, (str, int, float, bool))
                     or v is None},
            "user_id": user.get("id") or "default",
            "memory": dict(memory) if isinstance(memory, Mapping) else {}}


async def run_sandboxed(source: str, inputs: dict[str, Any], context: Any, *,
                        cpu_seconds: int | None = None, memory_mb: int | None = None,
                        network: bool = False) -> SandboxResult:
    """The one way a block runs untrusted Python (`async def execute(inputs,
    context)` in `source`): the OS sandbox with the block's limits, the
    server's isolation rule and memory budget, the user's context; prints
    become a progress event.  Raises BlockRunError (stage `run`).  Registry
    Python blocks and inline `code` blocks both come here."""
    limits = Limits(cpu_seconds=cpu_seconds or Limits.cpu_seconds,
                    memory_mb=memory_mb or Limits.memory_mb)
    services = getattr(context, "services", None) or {}
    try:
        result = await run_python(source, inputs, limits=limits, network=network,
                                  isolated_only=bool(services.get("sandbox_isolated_only")),
                                  context=python_context(context))
    except SandboxError as exc:
        raise BlockRunError("run", str(exc)) from None
    if result.logs:
        context.emit("progress", message=result.logs[-2000:], source="print")
    return result


def _is_text(schema: Any) -> bool:
    """An input schema that takes text and neither a list nor an object."""
    kinds = schema.get("type") if isinstance(schema, dict) else None
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    return "string" in kinds and not {"array", "object"} & set(kinds)


def _as_declared(definition: BlockDefinition, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs as the block declares them, as AgentFlow's pipelines hand them over:
    a list or mapping reaching an input typed `string` arrives as its JSON text
    (`{{n1.results}}` into a summariser's `content`), and None for an optional input
    whose schema refuses null (a missing path reads None) counts as not given: its
    default applies, else an LLM block's prompt renders it empty."""
    properties = definition.input_schema.get("properties") or {}
    required = set(definition.input_schema.get("required") or [])
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        schema = properties.get(name)
        if isinstance(value, (list, dict)) and _is_text(schema):
            value = interpolate_value(value)
        elif value is None and name not in required and isinstance(schema, dict) and \
                schema_problems(schema, None):
            continue
        out[name] = value
    return out


def _with_defaults(definition: BlockDefinition, inputs: dict[str, Any]) -> dict[str, Any]:
    filled = dict(inputs)
    for name, schema in (definition.input_schema.get("properties") or {}).items():
        if name not in filled and isinstance(schema, dict) and "default" in schema:
            filled[name] = schema["default"]
    return filled


async def execute_definition(definition: BlockDefinition, inputs: dict[str, Any],
                             context: Any) -> dict[str, Any]:
    """Check inputs, run the block (sandbox or LLM), check the output.
    Raises BlockRunError(stage = inputs | run | output)."""
    inputs = _with_defaults(definition, _as_declared(definition, inputs))
    problems = schema_problems(definition.input_schema, inputs)
    if problems:
        raise BlockRunError("inputs", f"inputs do not match the input schema of "
                            f"'{definition.id}': {'; '.join(problems)}")
    if definition.execution_type == "python":
        meta = definition.metadata
        result = await run_sandboxed(definition.source_code or "", inputs, context,
                                     cpu_seconds=meta.cpu_seconds, memory_mb=meta.memory_mb,
                                     network=meta.network)
        output, usage = result.output, {}
    else:
        from flowforge.blocks.llm import LLMBlock, LLMConfig

        # An optional input that was not given renders empty (AgentFlow's safe
        # formatting): `validate` accepts a block without it, so the run must too.
        declared = definition.input_schema.get("properties") or {}
        config = LLMConfig(prompt=definition.prompt_template or "",
                           inputs={**{name: "" for name in declared}, **inputs},
                           system=definition.system_prompt,
                           output_schema=definition.output_schema)
        try:
            answer = await LLMBlock.run(context, config)
        except BlockError as exc:
            raise BlockRunError("run", exc.message) from None
        output = {k: v for k, v in answer.items() if k not in _USAGE_KEYS or
                  k in (definition.output_schema.get("properties") or {})}
        usage = {k: answer[k] for k in ("model", "tokens", "cost") if k in answer
                 and k not in output}
    problems = schema_problems(definition.output_schema, output)
    if problems:
        raise BlockRunError("output", f"the output of '{definition.id}' does not match its "
                            f"output schema: {'; '.join(problems)}")
    return {**output, **usage}


@dataclass
class ExampleReport:
    block_id: str
    passed: bool
    results: list[dict[str, Any]]
    note: str = ""

    @property
    def first_error(self) -> str:
        for result in self.results:
            if not result["ok"]:
                return f"example {result['example']}: {result['error']}"
        return self.note

    def to_dict(self) -> dict[str, Any]:
        return {"block_id": self.block_id, "passed": self.passed, "results": self.results,
                "note": self.note}


def _matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, float) or isinstance(actual, float):
        return isinstance(actual, (int, float)) and isinstance(expected, (int, float)) and \
            math.isclose(expected, actual, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _matches(v, actual[k])
                                                for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and \
            all(_matches(e, a) for e, a in zip(expected, actual))
    return expected == actual


async def run_examples(definition: BlockDefinition, *, model: str | None = None,
                          on_event: Callable[[dict[str, Any]], None] | None = None,
                          env: Mapping[str, str] | None = None) -> ExampleReport:
    """Run every example. Python blocks must reproduce the expected output
    fields exactly (floats approximately); LLM blocks must fill their
    template and answer valid against the output schema (wording varies)."""
    if not definition.examples:
        return ExampleReport(definition.id, False, [], "the block has no examples to test")
    results = []
    context = DetachedContext(model=model, on_event=on_event, block_id=definition.id,
                              environ=env)
    for index, example in enumerate(definition.examples):
        try:
            output = await execute_definition(definition, dict(example.inputs), context)
        except BlockRunError as exc:
            results.append({"example": index, "ok": False, "error": str(exc)})
            continue
        fields = {k: v for k, v in output.items() if k not in ("model", "tokens", "cost")}
        if definition.execution_type == "python" and not _matches(example.outputs, fields):
            wrong = {k: fields.get(k) for k, v in example.outputs.items()
                     if not _matches(v, fields.get(k))}
            results.append({"example": index, "ok": False, "output": fields,
                            "error": f"expected {example.outputs}, got {wrong} for "
                                     f"{', '.join(wrong)}"})
        else:
            results.append({"example": index, "ok": True, "output": fields})
    return ExampleReport(definition.id, all(r["ok"] for r in results), results)


# -- the block type --------------------------------------------------------------------

def _registry_of(context: Any) -> Registry:
    """The registry as the run's user sees it: a server user's (`role` set, not
    an administrator) own blocks over the shared ones, whichever process runs
    it (a worker has no request to take the view from); else the shared blocks."""
    services = getattr(context, "services", None) or {}
    registry = services.get("registry") or get_registry()
    user = getattr(context, "user", None) or {}
    if user.get("role") and user.get("role") != "admin" and user.get("id"):
        return registry_for(registry, str(user["id"]))
    return registry


@register_block
class RegistryBlock(BlockType):
    """A Python or LLM block from the registry, its schemas checked."""

    type_name = "registry"
    Config = RegistryConfig
    outputs: dict[str, Output] = {}
    more_outputs = ("The fields of the registry block's output schema, checked when it "
                    "runs; an LLM block's also has `model`, `tokens` and `cost`. Open when "
                    "its schema does not list its properties.")

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        if not spec.uses:
            return [Problem(f"{where}.uses", "a registry block needs `uses: <block id>` "
                            "(see `flowforge blocks list`)")]
        block_id, version = parse_uses(spec.uses)
        try:
            registry = get_registry().now         # a sync read: compile time
            definition = registry.find(block_id, version)
        except FlowforgeError as exc:
            return [Problem(f"{where}.uses", f"cannot read the block registry: {exc}")]
        if definition is None:
            hint = did_you_mean(block_id, registry.ids()) or " (see `flowforge blocks list`)"
            what = f"version {version} of block '{block_id}'" if version else \
                f"block '{block_id}'"
            return [Problem(f"{where}.uses", f"no {what} in the registry{hint}")]
        return input_problems(definition, spec.with_, f"{where}.with")

    @classmethod
    def output_fields(cls, spec: BlockSpec, doc: Any) -> set[str] | None:
        if not spec.uses:
            return None
        try:
            definition = get_registry().now.find(*parse_uses(spec.uses))
        except FlowforgeError:
            return None                      # `check` reports the registry
        fields = schema_fields(definition.output_schema) if definition is not None else None
        if fields is None or definition.execution_type == "python":
            return fields
        return fields | {"model", "tokens", "cost"}

    @classmethod
    async def run(cls, context: BlockContext, config: RegistryConfig) -> Any:
        uses = context.node.spec.uses or ""
        block_id, version = parse_uses(uses)
        try:
            definition = await _registry_of(context).get(block_id, version)
        except FlowforgeError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        try:
            return await execute_definition(definition, dict(config.model_extra or {}), context)
        except BlockRunError as exc:
            raise BlockError(context.block_id, f"registry:{block_id}", str(exc)) from None


def input_problems(definition: BlockDefinition, given: Mapping[str, Any],
                   where: str) -> list[Problem]:
    """What validation can tell before a run: required inputs present, no
    unknown inputs, static values valid (templated ones are checked at run time)."""
    schema = definition.input_schema
    properties = schema.get("properties") or {}
    problems = []
    for name in schema.get("required") or []:
        if name not in given:
            problems.append(Problem(where, f"block '{definition.id}' needs input '{name}'"
                                    f"{_describe(properties.get(name))}"))
    if properties and schema.get("additionalProperties") is not True:
        for name in given:
            if name not in properties:
                hint = did_you_mean(name, properties)
                problems.append(Problem(f"{where}.{name}", f"'{definition.id}' has no input "
                                        f"'{name}'{hint}; its inputs: {', '.join(properties)}"))
    for name, value in _as_declared(definition, given).items():
        if name in properties and not has_templates(value):
            for problem in schema_problems(properties[name], value):
                problems.append(Problem(f"{where}.{name}", problem))
    return problems


def _describe(schema: Any) -> str:
    if isinstance(schema, dict) and schema.get("description"):
        return f" ({schema['description']})"
    return ""
