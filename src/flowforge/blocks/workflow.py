"""`workflow`: run another workflow, by path (relative to this document) or
by id, as one block. Its inputs are this block's `inputs`; its output is
the nested run's outputs. Nesting depth is limited so a workflow that
includes itself fails clearly instead of recursing forever."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.workflow.policy import CapabilityUse, looks_like_path


class WorkflowConfig(BlockConfig):
    workflow: str
    """Path of a workflow file (relative to this document) or a workflow id."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """Inputs of the nested run (templates allowed)."""


@register_block
class WorkflowBlock(BlockType):
    type_name = "workflow"
    Config = WorkflowConfig
    outputs: dict[str, Output] = {}
    more_outputs = ("The nested run's `outputs`: its response blocks' outputs by block id "
                    "(validation checks them once the nested document is loaded; an id "
                    "given as a template leaves them open).")
    holds_slot = False

    @classmethod
    def capabilities(cls, spec: Any) -> list[CapabilityUse]:
        reference = spec.with_.get("workflow")
        if isinstance(reference, str) and looks_like_path(reference):
            return [CapabilityUse("server_files", "workflow",
                                  f"running the workflow file '{reference}'")]
        return []

    @classmethod
    async def run(cls, context: BlockContext, config: WorkflowConfig) -> Any:
        return await context.run_workflow(config.workflow, config.inputs)
