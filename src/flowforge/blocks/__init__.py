"""One module per block type; `registry` is the table the engine reads."""

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, ChildOutcome, Routed
from flowforge.blocks.registry import block_types, get_block_type, register_block

#: Built-in block modules, imported on first use of the registry.
BUILTIN_MODULES = ["input", "response", "set", "function", "condition", "loop", "parallel",
                   "workflow", "agent", "router", "evaluator", "guardrail", "llm", "parser",
                   "http", "registry_block", "knowledge", "keyword_lookup", "web_search",
                   "progress", "wait", "approval"]

__all__ = ["BUILTIN_MODULES", "BlockConfig", "BlockContext", "BlockType", "ChildOutcome",
           "Routed", "block_types", "get_block_type", "register_block"]
