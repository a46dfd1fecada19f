"""What blocks call: Python functions, tool definitions, validation, MCP."""

from flowforge.tools.functions import (RegisteredFunction, function, get_function,
                                       registered_functions, unregister_function)

__all__ = ["RegisteredFunction", "function", "get_function", "registered_functions",
           "unregister_function"]
