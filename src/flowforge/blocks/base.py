"""What every block type is, and what a running block can ask of the engine.

A block type is a class with a Pydantic `Config` (extra fields forbidden, a
docstring per field: they feed the JSON Schema, the pipeline generator and
any UI) and an async `run(context, config) -> output`.  Registering one with
`@register_block` is all it takes: the engine never names a block type.

The engine hands each run a `BlockContext` (defined here as a protocol, built
by the engine) so blocks stay below the engine in the layering and container
blocks can still run child graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict

from flowforge.errors import Problem
from flowforge.workflow.graph import Graph, Node
from flowforge.workflow.model import BlockSpec
from flowforge.workflow.policy import TRUSTED, Policy

__all__ = ["BlockConfig", "BlockType", "BlockContext", "Routed", "ChildOutcome", "LATER",
           "Suspend", "policy_of", "is_set", "Output"]


def policy_of(context: Any) -> Policy:
    """The run's capability policy (a context built outside the engine, as in
    tests of a single block, is the local user's: trusted)."""
    return getattr(context, "policy", None) or TRUSTED


def is_set(value: Any) -> bool:
    """A flag as written in a document: true, or a template that may become true."""
    return value is True or (isinstance(value, str) and "{{" in value)


class Output(NamedTuple):
    """One field of a block type's output, as the manual's output table shows
    it: its type (`number`, `list of {id, title}`, ...) and what it holds."""

    type: str
    description: str


class BlockConfig(BaseModel):
    """Base of every block's config: unknown fields are errors, field
    docstrings become JSON-Schema descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


@dataclass(frozen=True, slots=True)
class Routed:
    """Returned by routing blocks: the output, and the ids of the outgoing
    blocks whose edges become active (the others are skipped)."""

    output: Any
    targets: tuple[str, ...]


class Suspend(Exception):
    """Raised by a block that must wait outside the process (a person's
    decision, a time far off).  Not an error: the block settles `waiting`,
    its dependants stay pending behind it, the rest of the run goes on, and
    the run stops `waiting` (a `run_waiting` event, not its end) with nothing
    held in memory.  `state` is
    stored as the block's checkpoint; when the run is resumed the block runs
    again and finds it (with any decision injected) in
    `context.resume_state`.  `resume_at` (epoch seconds) is when a resumer
    should pick the run up by itself; None waits for a person."""

    def __init__(self, state: dict[str, Any], resume_at: float | None, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.resume_at = resume_at
        self.reason = reason


@dataclass(slots=True)
class ChildOutcome:
    """What running a child graph produced."""

    outputs: dict[str, Any]             # child id -> output (succeeded ones)
    statuses: dict[str, str]            # child id -> succeeded | failed | skipped | cancelled
    errors: dict[str, str]              # child id -> error message (unhandled failures)

    @property
    def failed(self) -> bool:
        return bool(self.errors)


class BlockContext(Protocol):
    """What a running block may use. Built by the engine for each execution."""

    run_id: str
    workflow_id: str
    block_id: str
    node: Node
    scope: Mapping[str, Any]          # template roots: input, vars, env, memory, user, loop, blocks
    defaults: Mapping[str, Any]       # the workflow's `defaults:`
    env: Mapping[str, str]            # process environment over the workflow's `env:`
    user: Mapping[str, Any]

    source_dir: Any                   # where relative paths resolve (workflow.paths), or None

    def block_data(self) -> dict[str, Any]:
        """Outputs of the blocks of this graph that have run, by id (blockData)."""

    def name_mapping(self) -> dict[str, str]:
        """Normalised block name -> id (blockNameMapping)."""

    def emit(self, event_type: str, **data: Any) -> None:
        """Publish an event (progress, llm_delta, tool_called, ...) for this block."""

    def successors(self) -> list[Node]:
        """The blocks this block's outgoing edges lead to (a router's candidates)."""

    async def run_children(self, graph: Graph, extra_scope: dict[str, Any],
                           label: str) -> ChildOutcome:
        """Run a child graph (a loop pass, a parallel item) in a nested scope."""

    async def run_workflow(self, reference: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """Run another workflow (by path or id) nested in this run; returns its outputs."""


class _Later:
    __slots__ = ()

    def __repr__(self) -> str:
        return "LATER"


#: What `BlockType.run_now` returns when the block must be awaited through `run`.
LATER: Any = _Later()


class BlockType:
    """Base class of block types. Subclasses set `type_name`, `Config`, and
    implement `run`; containers and routers set the flags."""

    type_name: ClassVar[str] = ""
    Config: ClassVar[type[BaseModel]] = BlockConfig
    container: ClassVar[bool] = False
    routes: ClassVar[bool] = False
    holds_slot: ClassVar[bool] = True      # counts against the run's concurrency limit
    #: Nothing outside the run sees it run (set, condition, response, input):
    #: it may start before what it read is stored, since running it again is
    #: harmless.  Any other block waits for that (`service/recorder.py`).
    pure: ClassVar[bool] = False
    raw_fields: ClassVar[frozenset[str]] = frozenset()
    #: the seed systems' names of this block's fields that the camelCase rule cannot
    #: guess (`systemPrompt` -> `system`); see `workflow.seed_fields`
    seed_fields: ClassVar[dict[str, str]] = {}
    # Where a `{{secrets.NAME}}` may be written (workflow.secret_sinks): dotted
    # paths in `with`, `*` for any key or index; `api_key` needs no mention.
    credential_fields: ClassVar[tuple[str, ...]] = ()
    #: The fields every output of this type has, name -> Output(type, description):
    #: the one place they are written.  The manual's output table is made from it
    #: and, unless `output_fields` is overridden, validation checks
    #: `{{block.field}}` against it (docs/gen_reference.py fails the manual when
    #: the two disagree).
    outputs: ClassVar[dict[str, Output]] = {}
    #: A sentence for the manual on what a document adds to `outputs` (a `set`
    #: block's keys, an evaluator's metrics) or on why the output is open (a
    #: function's result); "" when `outputs` is the whole output.
    more_outputs: ClassVar[str] = ""

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        return []

    @classmethod
    def warnings(cls, spec: BlockSpec, where: str) -> list[Problem]:
        """Located problems that do not stop the document from validating
        (`validate` prints them): a block that will fail if a run reaches it."""
        return []

    @classmethod
    def mirrors(cls, spec: BlockSpec) -> tuple[str, str, str, tuple[str, ...]] | None:
        """What this block makes mirror its declaration at every run, as
        (the kind of store, its name, the field of `with` that declares it,
        the declaration): a knowledge base and its `sources:`.  Two blocks of
        one document that make one store mirror different declarations would
        each undo what the other stored, so validation refuses them.  None: it
        mirrors nothing."""
        return None

    @classmethod
    def implied_targets(cls, spec: BlockSpec) -> list[str]:
        return []

    @classmethod
    def scope_names(cls, spec: BlockSpec) -> set[str]:
        return set()

    @classmethod
    def expressions(cls, spec: BlockSpec) -> list[tuple[str, str]]:
        return []

    @classmethod
    def output_fields(cls, spec: BlockSpec, doc: Any) -> set[str] | None:
        """The output's top-level fields as far as the document tells; None
        when they are open. Validation refuses a reference to any other field,
        so a type that says more must say all of them.  By default: `outputs`,
        when that is the whole output (no `more_outputs`), else open."""
        return set(cls.outputs) if cls.outputs and not cls.more_outputs else None

    @classmethod
    def capabilities(cls, spec: BlockSpec) -> list[Any]:
        """What this block will do that reaches the host (a command, a server
        file, a private address), as `workflow.policy.CapabilityUse`s located
        inside `with`: a server refuses the document when its user lacks one.
        The block checks again when it runs (`policy_of(context).require`)."""
        return []

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        """True when `run` is known not to depend on running inside its own
        Task (no `asyncio.timeout`, no anyio cancel scopes): the engine may then
        start it inline and only make a Task if it suspends."""
        return False

    @classmethod
    def run_now(cls, context: BlockContext, config: Any) -> Any:
        """The output, computed without awaiting, for a block that never waits
        (set, condition, response, a plain function): the engine calls this
        first and so skips the coroutine and its start.  Return `LATER` when
        this run must go through `run` (the default)."""
        return LATER

    @classmethod
    async def run(cls, context: BlockContext, config: Any) -> Any:  # pragma: no cover
        raise NotImplementedError
