"""`unsupported`: a node of an imported workflow that has no flowforge counterpart.

A partial import (`flowforge import --partial`) keeps such a node in the
document, where its author can see it, with its title, its foreign type and
what to do instead, rather than dropping it.  `validate` accepts the
document and warns, naming the node; a run that reaches the block fails it
with the same words, so the rest of the workflow still runs and the failure
says exactly which node to replace.

    - id: send_mail
      type: unsupported
      name: Send mail
      with: {format: n8n, node_type: n8n-nodes-base.gmail, title: Send mail,
             instead: "use an http block calling the Gmail API"}
"""

from __future__ import annotations

from typing import Any

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, Problem
from flowforge.workflow.model import BlockSpec

__all__ = ["UnsupportedConfig", "UnsupportedBlock", "unsupported_message"]


class UnsupportedConfig(BlockConfig):
    format: str
    """The format the node was imported from (`dify`, `n8n`, ...)."""
    node_type: str
    """The node's type in that format (`n8n-nodes-base.gmail`)."""
    title: str = ""
    """The node's title as its author wrote it."""
    instead: str = ""
    """What to do instead: the block to use, or the setting to make."""


def unsupported_message(config: Any) -> str:
    """`node 'Send mail' (n8n-nodes-base.gmail) imported from n8n has no flowforge
    counterpart: <instead>`, from a config or a `with:` mapping."""
    get = config.get if isinstance(config, dict) else lambda key: getattr(config, key, None)
    title, node_type = get("title") or "", get("node_type") or "?"
    text = (f"node '{title}' ({node_type}) imported from {get('format') or '?'} has no "
            f"flowforge counterpart")
    instead = get("instead") or ""
    return f"{text}: {instead}" if instead else text


@register_block
class UnsupportedBlock(BlockType):
    type_name = "unsupported"
    Config = UnsupportedConfig
    # words for the author, never templates: a hint may quote `{{secrets.NAME}}`
    raw_fields = frozenset({"format", "node_type", "title", "instead"})
    outputs: dict[str, Output] = {}
    more_outputs = ("None: a run that reaches it fails the block. Its output is open, so "
                    "the blocks that read the node it stands for still validate.")

    @classmethod
    def warnings(cls, spec: BlockSpec, where: str) -> list[Problem]:
        return [Problem(where, f"'{spec.id}' fails if a run reaches it: "
                               f"{unsupported_message(spec.with_)}")]

    @classmethod
    async def run(cls, context: BlockContext, config: UnsupportedConfig) -> Any:
        raise BlockError(context.block_id, cls.type_name, unsupported_message(config))
