"""One module per block type; `type_table` is the table the engine reads."""

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, ChildOutcome, Routed
from flowforge.blocks._llm import sent_requests
from flowforge.blocks.type_table import BUILTIN_TYPES, block_types, get_block_type, \
    register_block

#: Built-in block modules.
BUILTIN_MODULES = list(BUILTIN_TYPES.values())

__all__ = ["BUILTIN_MODULES", "BUILTIN_TYPES", "BlockConfig", "BlockContext", "BlockType",
           "ChildOutcome", "Routed", "block_types", "get_block_type", "register_block",
           "sent_requests"]
