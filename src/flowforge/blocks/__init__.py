"""One module per block type; `registry` is the table the engine reads."""

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, ChildOutcome, Routed
from flowforge.blocks.registry import block_types, get_block_type, register_block

#: Built-in block types and the module of each, imported when its type is
#: first looked up (a run of `set` blocks never imports the agent's tool code).
BUILTIN_TYPES = {name: name for name in (
    "input", "response", "set", "function", "condition", "loop", "parallel", "workflow",
    "agent", "router", "evaluator", "guardrail", "llm", "parser", "http", "knowledge",
    "keyword_lookup", "web_search", "progress", "wait", "approval")}
BUILTIN_TYPES["registry"] = "registry_block"
#: Built-in block modules.
BUILTIN_MODULES = list(BUILTIN_TYPES.values())

__all__ = ["BUILTIN_MODULES", "BUILTIN_TYPES", "BlockConfig", "BlockContext", "BlockType",
           "ChildOutcome", "Routed", "block_types", "get_block_type", "register_block"]
