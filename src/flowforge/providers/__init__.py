"""LLM back ends behind one interface; model strings are resolved in `resolve`."""

from flowforge.providers.base import (ALLOW_MODEL_REQUESTS, LLMRequest, LLMResponse, Message,
                                      Provider, Timing, ToolCall, ToolSpec, Usage)
from flowforge.providers.resolve import (FALLBACK_MODEL, ProviderOptions, default_model,
                                          register_provider, resolve_model, split_model)
from flowforge.providers.retry import RetryPolicy
from flowforge.providers.pricing import Cost, cost_of
from flowforge.providers.call import call_model

__all__ = ["ALLOW_MODEL_REQUESTS", "Cost", "FALLBACK_MODEL", "LLMRequest", "LLMResponse",
           "Message", "default_model", "Provider", "ProviderOptions", "RetryPolicy", "Timing",
           "ToolCall", "ToolSpec", "Usage", "call_model", "cost_of", "register_provider",
           "resolve_model", "split_model"]
