"""The compiled form of a workflow: nodes, edges and pre-compiled configs.

Compiling once at load time is what lets the scheduler stay thin: a run only
counts settled dependencies, resolves pre-compiled templates and calls
blocks.  What a block type must tell the compiler is the small
`BlockTypeInfo` protocol, so the workflow layer knows nothing of the blocks
layer above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, ClassVar, Mapping, Protocol

from pydantic import BaseModel

from flowforge.errors import Problem
from flowforge.workflow.model import BlockSpec, RetryPolicy

__all__ = ["BlockTypeInfo", "CompiledWorkflow", "Node", "Graph", "NAMESPACES", "DATA", "ERROR",
           "REQUIRED", "ALTERNATIVE", "ON_FAILURE"]

#: Template roots that are not blocks.
NAMESPACES = frozenset({"input", "vars", "env", "secrets", "memory", "user", "loop", "run"})

DATA = "data"      # a template reference or `after`: active when the source succeeds
ERROR = "error"    # an `on_error` edge: active only when the source fails

# How an edge counts for the block it leads to (`Node.out`, what the scheduler
# reads): two flags.  Without ALTERNATIVE the edge is required; with it, it is a
# member of the block's join (`after: {any: [...]}`), of which one must run.
REQUIRED = 0       # the source must have run (succeeded and, if it routes, chosen this block)
ALTERNATIVE = 1    # a join member: one member must have run
ON_FAILURE = 2     # an `on_error` edge: it runs for its handler by failing


class BlockTypeInfo(Protocol):
    """What the compiler, the engine, validation and the views read of a block
    type: the class attributes and classmethods of `blocks.base.BlockType`,
    which gives each a default (so a reader uses them plainly, never probes
    with `getattr`).  Declared here so the workflow layer knows nothing of
    the blocks layer above it."""

    type_name: ClassVar[str]
    Config: ClassVar[type[BaseModel]]
    container: ClassVar[bool]      # holds child `blocks:`
    routes: ClassVar[bool]         # chooses which outgoing edges are active
    holds_slot: ClassVar[bool]     # counts against the run's concurrency limit
    pure: ClassVar[bool]           # nothing outside the run sees it run
    #: top-level `with` keys passed to the block unresolved (expressions it evaluates itself)
    raw_fields: ClassVar[frozenset[str]]
    seed_fields: ClassVar[dict[str, str]]          # seed systems' names of its fields
    credential_fields: ClassVar[tuple[str, ...]]   # where a `{{secrets.NAME}}` may go
    outputs: ClassVar[Mapping[str, Any]]           # field -> Output(type, description)
    more_outputs: ClassVar[str]                    # what a document adds to `outputs`

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        """Type-specific checks beyond the config model (may be empty)."""

    @classmethod
    def warnings(cls, spec: BlockSpec, where: str) -> list[Problem]:
        """What validate should say without refusing the document (an
        `unsupported` block from an import); usually empty."""

    @classmethod
    def implied_targets(cls, spec: BlockSpec) -> list[str]:
        """Blocks this block points at itself (a condition's `goto`s)."""

    @classmethod
    def scope_names(cls, spec: BlockSpec) -> set[str]:
        """Extra template roots visible in this block's own `with` (a loop's children)."""

    @classmethod
    def expressions(cls, spec: BlockSpec) -> list[tuple[str, str]]:
        """(location under `with`, source) of each expression in a raw field;
        their names become edges like template references do."""

    @classmethod
    def output_fields(cls, spec: BlockSpec, doc: Any) -> set[str] | None:
        """The top-level fields of this block's output as far as the document
        tells (a `set` block's keys); None when they are open (an agent's free
        answer). References to another field are problems (`output_check`)."""

    @classmethod
    def capabilities(cls, spec: BlockSpec) -> list[Any]:
        """What the block will do that reaches the host (`policy.CapabilityUse`s)."""

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        """True when the engine may start `run` inline, without its own Task."""

    @classmethod
    def run_now(cls, context: Any, config: Any) -> Any:
        """The output computed without awaiting, or `blocks.base.LATER`."""

    @classmethod
    async def run(cls, context: Any, config: Any) -> Any:
        """Run the block: its output (or a `Routed` for a routing block)."""


@dataclass(eq=False)
class Node:
    """One block, compiled."""

    id: str
    type: str
    spec: BlockSpec
    where: str
    info: BlockTypeInfo                        # the block type
    config: Any = None                         # validated Config when `with` is static
    resolve: Callable[[dict], Any] | None = None   # else: scope -> resolved `with`
    inputs: dict[str, str] = field(default_factory=dict)     # source id -> DATA | ERROR
    dependants: list[str] = field(default_factory=list)
    children: Graph | None = None
    retry: RetryPolicy | None = None
    timeout: float | None = None
    env_refs: frozenset[str] = frozenset()     # env variables its templates read
    joins: frozenset[str] = frozenset()        # its join of alternatives: one of them must run
    out: list[tuple[str, int]] = field(default_factory=list)  # (dependant, ALTERNATIVE/ON_FAILURE flags)
    alias: str | None = None                   # normalised name, another template root for its output
    config_ok: bool = True                     # `with` fits the block's config (hooks may read it)
    #: every template and expression reference in its `with` (`templates.Reference`),
    #: what running the block alone needs values for (service/block_test.py)
    reads: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name or self.id


@dataclass(eq=False)
class Graph:
    """A set of nodes in one scope (the workflow, or a container's children)."""

    nodes: dict[str, Node]
    names: dict[str, str]          # normalised name -> id (ids included)
    outer_refs: set[str] = field(default_factory=set)   # blocks read from enclosing scopes
    warnings: list[Problem] = field(default_factory=list)  # located, not fatal (`validate` prints)

    @cached_property
    def response_ids(self) -> tuple[str, ...]:
        """The response blocks, in document order (a run's `outputs`)."""
        return tuple(nid for nid, node in self.nodes.items() if node.type == "response")

    @cached_property
    def sink_ids(self) -> tuple[str, ...]:
        """Blocks nothing depends on (a run's `outputs` when it has no response block)."""
        return tuple(self.sinks())

    @cached_property
    def input_counts(self) -> dict[str, int]:
        """Node id -> how many dependencies it waits for (each run copies it)."""
        return {nid: len(node.inputs) for nid, node in self.nodes.items()}

    @cached_property
    def zero_counts(self) -> dict[str, int]:
        return dict.fromkeys(self.nodes, 0)

    @cached_property
    def root_ids(self) -> tuple[str, ...]:
        return tuple(self.roots)

    @property
    def roots(self) -> list[str]:
        return [node_id for node_id, node in self.nodes.items() if not node.inputs]

    def sinks(self) -> list[str]:
        return [node_id for node_id, node in self.nodes.items() if not node.dependants]


@dataclass(eq=False)
class CompiledWorkflow:
    """A validated document, its compiled graph, and where it came from
    (nested `workflow` blocks resolve relative paths against `source`)."""

    doc: Any                     # Workflow
    graph: Graph
    source: Any = None           # pathlib.Path of the file, when loaded from one

    @property
    def id(self) -> str:
        return self.doc.id

    @cached_property
    def document(self) -> dict[str, Any]:
        """The document as JSON data (what each run's record keeps), dumped once."""
        return self.doc.model_dump(mode="json", by_alias=True, exclude_none=True)

    @cached_property
    def model_uses(self) -> tuple[Any, ...]:
        """`doc.models()`, walked once: every run checks its models before its
        first block (a walk per run was a sixth of a small run's CPU)."""
        return tuple(self.doc.models())

    @cached_property
    def block_model_uses(self) -> tuple[Any, ...]:
        """`model_uses` of the blocks alone: what a nested run checks (its
        `defaults:` and `budget:` are the parent run's)."""
        return tuple(use for use in self.model_uses if use.where.startswith("blocks["))

    @cached_property
    def workflow_references(self) -> tuple[tuple[str, BlockSpec, str], ...]:
        """`doc.workflow_references()`, walked once, for the same reason."""
        return tuple(self.doc.workflow_references())
