"""What a tool is, whatever runs it: a name, a description, a JSON Schema of
parameters, and an async `execute(arguments, context)`.

Every kind (a Python function, a block used as a tool, an HTTP call, an MCP
server's tool, knowledge search) is reduced to this one shape, so the agent's
tool loop, the argument validation and the run record treat them alike.
`ToolContext` is what a tool may see of the run (the seed's `blockData`,
`blockNameMapping`, workflow variables, environment, run and workflow ids).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from flowforge.providers.base import Message, ToolSpec

__all__ = ["Tool", "ToolContext", "Executor", "GuidedAnswer"]


@dataclass
class ToolContext:
    """The run as a tool sees it (read-only by convention)."""

    run_id: str = ""
    workflow_id: str = ""
    block_id: str = ""
    block_data: Mapping[str, Any] = field(default_factory=dict)
    """Outputs of the blocks settled so far, by id (the seed's `blockData`)."""
    block_name_mapping: Mapping[str, str] = field(default_factory=dict)
    """Normalised block name -> block id (the seed's `blockNameMapping`)."""
    variables: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    user: Mapping[str, Any] = field(default_factory=dict)
    emit: Callable[..., Any] | None = None
    """Publish an event for the calling block (progress, ...)."""
    block_context: Any = None
    """The calling block's `BlockContext`, for tools that run blocks."""
    idempotency_key: str | None = None
    """The calling block's key: the same when it runs again after a crash (each call
    of one turn can add its call id to it)."""


Executor = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]


@dataclass
class Tool:
    """A tool the model may call."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Executor
    kind: str = "function"                  # function | block | http | mcp | knowledge
    runs_commands: bool = False
    """True when the tool runs shell commands: shell metacharacters are then refused."""
    max_string_length: int | None = None
    """Per-tool override of the validation policy's string limit."""
    guided: Callable[[], GuidedAnswer | None] | None = None
    """A finishing tool's short form for small models (`GuidedAnswer`), built from
    what the conversation has found so far; None when it has nothing to offer."""

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


@dataclass
class GuidedAnswer:
    """A finishing tool's call as a small model can write it.

    Asked for a whole tool call after a long conversation, the 0.5B model copied
    the most prominent short text in front of it (a document title, the question).
    A guided answer is one short request of its own: `messages` (e.g. numbered
    passages, then the question), a small `schema` the answer is constrained to,
    and `arguments`, which turns that answer into the tool's real arguments; the
    tool then runs and checks them as it checks any call."""

    messages: list[Message]
    schema: dict[str, Any]
    arguments: Callable[[dict[str, Any]], dict[str, Any]]
    max_tokens: int = 160
