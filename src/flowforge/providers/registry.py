"""Model strings are resolved here and nowhere else.

`openai/gpt-4o` -> (the `openai` provider, "gpt-4o"). Providers plug in with
`register_provider(prefix, factory)` (simonw/llm's tiny hook): the factory
gets the part after the prefix and the run's environment and returns a
Provider; instances are cached per (prefix, key) so connections and loaded
weights are reused across blocks and runs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from flowforge.errors import ProviderError
from flowforge.providers.base import Provider
from flowforge.workflow.policy import model_key_variables

__all__ = ["PROVIDER_KEY_VARIABLES", "provider_keys_in", "ProviderOptions", "register_provider", "resolve_model", "split_model", "known_prefixes",
           "DEFAULT_MODEL", "clear_provider_cache", "key_variables"]

DEFAULT_MODEL = "local/smollm2"

@dataclass(frozen=True)
class ProviderOptions:
    """What a factory may use besides the model name."""

    env: Mapping[str, str] = field(default_factory=dict)   # process env over workflow `env:`
    base_dir: Path | None = None                          # folder of the workflow file


#: prefix -> factory(model_name, options) -> (Provider, model name to send)
Factory = Callable[[str, ProviderOptions], tuple[Provider, str]]
_FACTORIES: dict[str, Factory] = {}
_CACHE: dict[tuple[str, str], tuple[Provider, str]] = {}

# Built-in providers, imported on first use so an unused vendor SDK is never imported.
_BUILTIN = {
    "scripted": "flowforge.providers.scripted",
    "local": "flowforge.providers.local",
    "openai": "flowforge.providers.openai",
    "openai-compatible": "flowforge.providers.openai_compatible",
    "anthropic": "flowforge.providers.anthropic",
    "google": "flowforge.providers.google",
    "replicate": "flowforge.providers.replicate",
}


def register_provider(prefix: str, factory: Factory) -> None:
    _FACTORIES[prefix] = factory


def known_prefixes() -> list[str]:
    return sorted(set(_FACTORIES) | set(_BUILTIN))


def split_model(model: str) -> tuple[str, str]:
    """`openai/gpt-4o` -> ("openai", "gpt-4o"); a bad string is a clear error."""
    if not isinstance(model, str) or "/" not in model:
        raise ProviderError(f"model '{model}' does not name a provider; write "
                            f"'<provider>/<model>', e.g. 'openai/gpt-4o' or '{DEFAULT_MODEL}' "
                            f"(providers: {', '.join(known_prefixes())})")
    prefix, _, name = model.partition("/")
    if not name:
        raise ProviderError(f"model '{model}' names no model after '{prefix}/'")
    return prefix, name


def resolve_model(model: str, options: ProviderOptions | None = None,
                  cache_key: str = "") -> tuple[Provider, str]:
    """The provider for `model` and the model name to send it. `cache_key`
    separates instances that differ by credentials or base URL."""
    prefix, name = split_model(model)
    options = options or ProviderOptions()
    key = (model, f"{cache_key}|{options.base_dir or ''}")
    if key in _CACHE:
        return _CACHE[key]
    factory = _FACTORIES.get(prefix)
    if factory is None and prefix in _BUILTIN:
        try:
            importlib.import_module(_BUILTIN[prefix])
        except ImportError as exc:
            raise ProviderError(f"the '{prefix}' provider is not available: {exc}",
                                provider=prefix) from None
        factory = _FACTORIES.get(prefix)
    if factory is None:
        raise ProviderError(f"unknown provider '{prefix}' in model '{model}' "
                            f"(known: {', '.join(known_prefixes())})")
    resolved = factory(name, options)
    _CACHE[key] = resolved
    return resolved


def key_variables(model: str) -> tuple[str, ...]:
    """Where the provider of `model` looks for its API key (empty for
    providers without one: local, scripted): what a block's own `api_key`
    overrides.  The table is the policy gate's (`model_key_variables`), so
    what a key pays for and what the gate asks for are one list."""
    split_model(model)
    return model_key_variables(model)


def clear_provider_cache() -> None:
    _CACHE.clear()


#: Variables model providers read their keys from (a server shares them only with `share_provider_keys`).
PROVIDER_KEY_VARIABLES = frozenset({
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "OPENROUTER_API_KEY", "AZURE_OPENAI_API_KEY", "REPLICATE_API_TOKEN", "PERPLEXITY_API_KEY",
    "TAVILY_API_KEY", "BRAVE_API_KEY"})


def provider_keys_in(environ: Mapping[str, str]) -> dict[str, str]:
    """The provider keys among `environ` (the fixed names, and every
    `OPENAI_COMPATIBLE_<SERVER>_API_KEY`): what a server, or a worker running its
    runs, shares when the administrator says so."""
    return {name: value for name, value in environ.items()
            if name in PROVIDER_KEY_VARIABLES or (
                name.startswith("OPENAI_COMPATIBLE_") and name.endswith("_API_KEY"))}
