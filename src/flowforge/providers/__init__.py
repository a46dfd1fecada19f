"""LLM back ends behind one interface; model strings are resolved in `registry`."""

from flowforge.providers.base import (ALLOW_MODEL_REQUESTS, LLMRequest, LLMResponse, Message,
                                      Provider, Timing, ToolCall, ToolSpec, Usage)
from flowforge.providers.registry import (DEFAULT_MODEL, ProviderOptions, register_provider,
                                          resolve_model, split_model)

__all__ = ["ALLOW_MODEL_REQUESTS", "DEFAULT_MODEL", "LLMRequest", "LLMResponse", "Message",
           "Provider", "ProviderOptions", "Timing", "ToolCall", "ToolSpec", "Usage",
           "register_provider", "resolve_model", "split_model"]
