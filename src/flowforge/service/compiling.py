"""Checking big documents away from the server's event loop, and bounding them.

Compiling a document is pure Python: an 886 KB document of 9,000 blocks took
1.2-1.9 s, and in a thread it still holds the interpreter's lock, so the
server's loop (`/health`, every stream) waited as long.  Documents of
`POOL_FROM_BLOCKS` blocks or more (texts of `BIG_BODY` bytes or more) are
therefore parsed, validated and compiled in a separate process (`CompilePool`: a few workers, started on
first use); smaller ones, which compile in milliseconds, are compiled here.
A compiled workflow holds closures and cannot cross processes: the worker
sends back what the caller needs (`Checked`: the canonical document, the
workflows it runs by id, the join warnings), and a run compiles the stored
version when it starts, as it always did.

Every document is bounded (`max_blocks`, counting the blocks inside
containers): past it, a located validation error before anything is
compiled.

The worker must see the document as this process would: the same block
types and the same block registry.  A process that registered block types
a fresh interpreter does not have (`--import` plugins), or that uses a
registry set in code (tests, `use_registry`), compiles here instead.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from flowforge.errors import Problem, ValidationFailed

__all__ = ["CompilePool", "Checked", "check_data", "count_blocks", "check_block_count",
           "POOL_FROM_BLOCKS", "BIG_BODY", "MAX_BLOCKS_SETTING"]

#: Documents with at least this many blocks are compiled in the pool ...
POOL_FROM_BLOCKS = 200
#: ... and texts of at least this many bytes are parsed (and checked) there.
BIG_BODY = 16 * 1024
MAX_BLOCKS_SETTING = "FLOWFORGE_MAX_DOCUMENT_BLOCKS, `flowforge serve --max-document-blocks`"


def count_blocks(data: Any) -> int:
    """Blocks in a document's data (a mapping with `blocks:`), containers' children included."""
    count, stack = 0, [data]
    while stack:
        item = stack.pop()
        blocks = item.get("blocks") if isinstance(item, dict) else None
        if isinstance(blocks, list):
            count += len(blocks)
            stack.extend(block for block in blocks if isinstance(block, dict))
    return count


def check_block_count(data: Any, limit: int) -> None:
    """ValidationFailed at `blocks` when the document holds more than `limit` blocks (0: none)."""
    count = count_blocks(data)
    if limit and count > limit:
        raise ValidationFailed([Problem("blocks", (
            f"the document has {count} blocks, more than the {limit} this server takes "
            f"({MAX_BLOCKS_SETTING}): split it into workflows that run each other "
            f"(`type: workflow`)"))])


@dataclass
class Checked:
    """A valid document as a pool worker compiled it: what a save needs."""

    id: str
    document: dict[str, Any]
    workflow_references: tuple = ()
    warnings: list[Problem] = field(default_factory=list)
    source: Any = None                   # stored documents have no file (preflight's key)


def check_data(data: Any, policy: Any = None, model_override: str | None = None
               ) -> Checked:
    """Validate, compile and policy-check a document's data (here or in a
    worker): a `Checked`, or the errors `compile_document` raises."""
    from flowforge.service.loading import compile_document
    from flowforge.workflow.joins import join_warnings
    from flowforge.workflow.loader import document_from_data
    from flowforge.workflow.policy import check_policy

    compiled = compile_document(document_from_data(data, "<request body>"))
    if policy is not None:
        check_policy(compiled, policy, model_override=model_override)
    return Checked(compiled.id, compiled.document, tuple(compiled.workflow_references),
                   join_warnings(compiled.graph))


class _Elsewhere(Exception):
    """The worker cannot see the document as the caller does: compile there."""


def _in_worker(context: dict[str, Any], job: Callable[..., Any], args: tuple) -> Any:
    """Run `job(*args)` in a worker under the caller's block types and registry."""
    from flowforge.blocks.type_table import block_types
    from flowforge.registry import view_registry_as

    if not set(context["block_types"]) <= set(block_types()):
        raise _Elsewhere("block types registered by plugins")
    if context["registry_url"]:
        os.environ["FLOWFORGE_REGISTRY_URL"] = context["registry_url"]
    view_registry_as(context["viewer"])
    return job(*args)


def _caller_context() -> dict[str, Any] | None:
    """What a worker needs to see documents as this process does; None when
    it cannot (a registry set in code)."""
    from flowforge.blocks.type_table import block_types
    from flowforge.registry.registry import registry_view

    view = registry_view()
    return None if view is None else {"block_types": sorted(block_types()), **view}


class CompilePool:
    """A few worker processes that check big documents, started on first use."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or max(1, min(2, (os.cpu_count() or 1) - 1))
        self._executor: ProcessPoolExecutor | None = None
        self.jobs = 0                        # jobs run in a worker (what tests look at)

    async def run(self, job: Callable[..., Any], *args: Any, big: bool) -> Any:
        """`job(*args)` in a worker when the document is `big` (and the
        caller's view can be shipped), else in a thread here.  The job's own
        exceptions (ValidationFailed, ...) are raised."""
        context = _caller_context() if big else None
        if context is not None:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(self._pool(), _in_worker, context, job,
                                                  args)
            except _Elsewhere:
                pass
            finally:
                self.jobs += 1
        return await asyncio.to_thread(job, *args)

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            # spawn: a fork of a server holds its threads' locks and its open databases
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
