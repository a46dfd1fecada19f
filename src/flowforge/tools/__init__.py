"""What blocks call: Python functions, tool definitions, validation, MCP, HTTP."""

from flowforge.tools.executor import ToolOutcome, result_text, run_tool_calls
from flowforge.tools.functions import (RegisteredFunction, function, get_function,
                                       registered_functions, unregister_function)
from flowforge.tools.spec import Tool, ToolContext
from flowforge.tools.validation import ToolValidation, rejection_message, validate_arguments

__all__ = ["RegisteredFunction", "Tool", "ToolContext", "ToolOutcome", "ToolValidation",
           "function", "get_function", "registered_functions", "rejection_message",
           "result_text", "run_tool_calls", "unregister_function", "validate_arguments"]
