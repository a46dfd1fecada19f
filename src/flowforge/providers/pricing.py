"""What a model call cost, from the maintained `genai-prices` table.

`cost_of("openai/gpt-4o", usage)` -> `Cost(input, output, total)` in USD.
Local and scripted models cost nothing; so do self-hosted OpenAI-compatible
servers (Ollama, vLLM, LM Studio, llama.cpp), except the hosted ones the
table knows (`openai-compatible/openrouter/...`, `openai-compatible/azure/...`).
A model the table does not know costs 0 and is logged once, so a new model
name never fails a run.  The table is the snapshot shipped with the
installed `genai-prices` (no network at run time): upgrade the package to
refresh prices.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from functools import lru_cache

from flowforge.model_strings import parse_model
from flowforge.providers.base import Usage

__all__ = ["Cost", "cost_of", "FREE_PREFIXES"]

log = logging.getLogger(__name__)

#: Providers that never cost money.
FREE_PREFIXES = frozenset({"local", "scripted"})

# openai-compatible/<name>/... names that genai-prices knows as providers.
_HOSTED_COMPATIBLE = {"openrouter": "openrouter", "azure": "azure", "groq": "groq",
                      "together": "together", "deepseek": "deepseek", "mistral": "mistral",
                      "fireworks": "fireworks", "x-ai": "x-ai", "xai": "x-ai",
                      "perplexity": "perplexity"}
_DIRECT = {"openai": "openai", "anthropic": "anthropic", "google": "google"}


@dataclass(frozen=True)
class Cost:
    input: float = 0.0
    output: float = 0.0

    @property
    def total(self) -> float:
        return self.input + self.output

    def to_dict(self) -> dict[str, float]:
        return {"input": self.input, "output": self.output, "total": self.total}


FREE = Cost()


def _price_ref(model: str) -> tuple[str, str] | None:
    """(genai-prices provider id, model ref) for a flowforge model string, or
    None when the model is free (local, scripted, self-hosted)."""
    parsed = parse_model(model)
    if parsed.provider in _DIRECT:
        return _DIRECT[parsed.provider], parsed.name
    if parsed.server:
        provider = _HOSTED_COMPATIBLE.get(parsed.server.lower())
        if provider and parsed.served_name:
            return provider, parsed.served_name
    return None


@lru_cache(maxsize=256)
def _warn_unknown(provider: str, model: str, reason: str) -> None:
    log.warning("no price known for %s model %r (%s); its cost is counted as 0",
                provider, model, reason)


def cost_of(model: str, usage: Usage) -> Cost:
    """USD cost of `usage` on `model` (a full model string such as `openai/gpt-4o`)."""
    ref = _price_ref(model)
    if ref is None or (usage.prompt_tokens == 0 and usage.completion_tokens == 0):
        return FREE
    provider, name = ref
    try:
        import genai_prices
    except ImportError:
        _warn_unknown(provider, name, "genai-prices is not installed: pip install "
                                      "'flowforge[pricing]'")
        return FREE
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            price = genai_prices.calc_price(
                genai_prices.Usage(input_tokens=usage.prompt_tokens,
                                   output_tokens=usage.completion_tokens),
                name, provider_id=provider)
    except LookupError as exc:
        _warn_unknown(provider, name, str(exc))
        return FREE
    return Cost(float(price.input_price), float(price.output_price))
