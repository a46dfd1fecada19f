"""Stored workflows: validate before saving, compile each version once.

A workflow that runs another stored workflow by id is saved only when that
one exists for the same user and passes the same checks: a missing child is
refused at save, not found by the first run after its earlier blocks ran.

Every save is a new version; a version never changes, so a compiled version
is cached by `(owner, id, version)` and many runs of it cost one compile.
A save is checked by `compiling.CompilePool` (a big document in another
process, so the server's loop is not held) and bounded by `max_blocks`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Awaitable, Callable

from flowforge.engine import preflight
from flowforge.errors import NotFound, Problem, ValidationFailed, WorkflowError
from flowforge.service.compiling import (POOL_FROM_BLOCKS, Checked, CompilePool,
                                         check_block_count, check_data, count_blocks)
from flowforge.service.loading import compile_document
from flowforge.service.runs import guarded_resolver
from flowforge.storage.base import Storage
from flowforge.workflow.graph import CompiledWorkflow
from flowforge.workflow.loader import document_from_data
from flowforge.workflow.policy import TRUSTED, Policy, looks_like_path

__all__ = ["WorkflowStore"]


class WorkflowStore:
    """Save, fetch and compile one storage's workflows."""

    def __init__(self, storage: Storage, cache_size: int = 256, *, max_blocks: int = 0,
                 compiler: CompilePool | None = None) -> None:
        self.storage = storage
        self.cache_size = cache_size
        self.max_blocks = max_blocks                   # 0: any number of blocks
        self.compiler = compiler or CompilePool()
        self._compiled: OrderedDict[tuple[str, str, int], CompiledWorkflow] = OrderedDict()

    async def save(self, owner: str, data: Any, *, expected_id: str | None = None,
                   policy: Policy = TRUSTED, model_override: str | None = None,
                   source: str | None = None, warnings: list[Problem] | None = None
                   ) -> dict[str, Any]:
        """Validate and compile `data` (raising WorkflowError/ValidationFailed with
        every located problem; more than `max_blocks` blocks is one), check it
        against the saver's `policy` (CapabilityDenied), then store it as the
        next version, with `source`, the text `data` was parsed from, kept as
        written.  `warnings` gets the document's join warnings."""
        if isinstance(data, dict) and expected_id is not None:
            given = data.get("id")
            if given is None:
                data = {**data, "id": expected_id}
            elif given != expected_id:
                raise WorkflowError(f"the document's id '{given}' differs from the id in the "
                                    f"URL '{expected_id}': make them the same", where="id")
        check_block_count(data, self.max_blocks)
        checked = await self.compiler.run(check_data, data, policy, model_override,
                                          big=count_blocks(data) >= POOL_FROM_BLOCKS)
        problems = await self.nested_problems(owner, checked, policy, model_override)
        if problems:
            raise ValidationFailed(problems)
        version = await self.storage.save_workflow(owner, checked.id, checked.document,
                                                  source)
        if warnings is not None:
            warnings.extend(checked.warnings)
        return await self.get(owner, checked.id, version)

    async def nested_problems(self, owner: str, compiled: CompiledWorkflow | Checked,
                              policy: Policy = TRUSTED, model_override: str | None = None
                              ) -> list[Problem]:
        """The stored workflows `compiled` runs by id (`workflow: <id>` or
        `<id>@<version>`, blocks and agent tools), looked up among `owner`'s
        as its runs will look them up: one that does not exist (another user's
        is one that does not exist), one the saver's policy refuses, or one
        whose inputs do not match, located at the block that names it.  A
        workflow may name itself (it is the document being saved); file paths
        are left to the save's warnings (`--files-root`)."""
        async def stored(reference: str) -> CompiledWorkflow:
            workflow_id, _, pinned = reference.partition("@")
            if workflow_id == compiled.id and not pinned:
                return compiled                                  # type: ignore[return-value]
            version = int(pinned) if pinned.isdigit() else None
            return (await self.compiled(owner, workflow_id, version))[1]

        resolve = guarded_resolver(policy, stored, model_override)

        def by_id(reference: str, base: Any) -> Any:
            if isinstance(compiled, Checked) and reference == compiled.id:
                return None              # itself, checked as it was compiled
            return None if looks_like_path(reference) else resolve(reference, base)

        return await preflight.nested_problems(compiled, by_id, lambda child: [])

    async def get(self, owner: str, workflow_id: str, version: int | None = None
                  ) -> dict[str, Any]:
        row = await self.storage.get_workflow(owner, workflow_id, version)
        if row is None:
            which = f" version {version}" if version is not None else ""
            raise NotFound(f"no workflow '{workflow_id}'{which}")
        return row

    async def compiled(self, owner: str, workflow_id: str, version: int | None = None
                       ) -> tuple[dict[str, Any], CompiledWorkflow]:
        row = await self.get(owner, workflow_id, version)
        key = (owner, workflow_id, row["version"])
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = compile_document(document_from_data(row["document"],
                                                           f"{workflow_id} v{row['version']}"))
            self._remember(key, compiled)
        else:
            self._compiled.move_to_end(key)
        return row, compiled

    def reader(self, owner: str) -> Callable[[str], Awaitable[CompiledWorkflow]]:
        """What a run of `owner` resolves `workflow: ID` / `ID@VERSION` with: their
        own stored workflows only (a server's runs and a worker's alike)."""
        async def stored(reference: str) -> CompiledWorkflow:
            workflow_id, _, pinned = reference.partition("@")
            version = int(pinned) if pinned.isdigit() else None
            return (await self.compiled(owner, workflow_id, version))[1]
        return stored

    def _remember(self, key: tuple[str, str, int], compiled: CompiledWorkflow) -> None:
        self._compiled[key] = compiled
        while len(self._compiled) > self.cache_size:
            self._compiled.popitem(last=False)
