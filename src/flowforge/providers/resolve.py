"""Model strings are resolved here and nowhere else: `flowforge.model_strings`
splits the text, this module turns it into a provider.

`openai/gpt-4o` -> (the `openai` provider, "gpt-4o"). Providers plug in with
`register_provider(prefix, factory)` (simonw/llm's tiny hook): the factory
gets the part after the prefix and the run's environment and returns a
Provider; instances are cached per (prefix, key) so connections and loaded
weights are reused across blocks and runs.

`default_model()` is the model of a block, a build, a chat or a research run
that names none: `FLOWFORGE_DEFAULT_MODEL` when set (the test suite pins
`local/smollm2`, fast), else `local/qwen2.5-0.5b` when `make install` put its
verified file in the model cache, else `FALLBACK_MODEL`, said once per process
on stderr with the command that installs the better one.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from flowforge.errors import MissingCredentials, Problem, ProviderError
from flowforge.model_strings import parse_model
from flowforge.providers.base import Provider
from flowforge.workflow.policy import model_key_variables

__all__ = ["PROVIDER_KEY_VARIABLES", "provider_keys_in", "ProviderOptions", "register_provider",
           "resolve_model", "split_model", "known_prefixes", "default_model", "FALLBACK_MODEL",
           "clear_provider_cache", "key_variables", "register_check", "check_model",
           "check_models"]

#: The default when the better embedded model is not installed: small, always there.
FALLBACK_MODEL = "local/smollm2"
_FALLBACK_SAID: list[bool] = []


def default_model() -> str:
    """The model used where a document, a command or a request names none
    (see the module docstring).  Costs a `stat`: called per block."""
    chosen = os.environ.get("FLOWFORGE_DEFAULT_MODEL", "").strip()
    if chosen:
        return chosen
    from flowforge.providers.local_models import QWEN, REPAIR, is_present

    if is_present(QWEN):
        return f"local/{QWEN.name}"
    if not _FALLBACK_SAID:
        _FALLBACK_SAID.append(True)
        print(f"flowforge: local/{QWEN.name} is not installed, so the default model is "
              f"{FALLBACK_MODEL} (135M parameters, weak answers); run {REPAIR} to install it",
              file=sys.stderr, flush=True)
    return FALLBACK_MODEL

@dataclass(frozen=True)
class ProviderOptions:
    """What a factory may use besides the model name."""

    env: Mapping[str, str] = field(default_factory=dict)   # process env over workflow `env:`
    base_dir: Path | None = field(default_factory=Path.cwd)
    """Where a relative model file (`scripted/rules.yaml`, `local/m.gguf`)
    resolves (`workflow.paths.resolve_path`): the document's root for a
    block's model, the working directory for a model named outside any
    document; None on a server with no root for it: such a path is refused."""


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
                            f"'<provider>/<model>', e.g. 'openai/gpt-4o' or '{FALLBACK_MODEL}' "
                            f"(providers: {', '.join(known_prefixes())})")
    parsed = parse_model(model)
    if not parsed.name:
        raise ProviderError(f"model '{model}' names no model after '{parsed.provider}/'")
    return parsed.provider, parsed.name


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


#: prefix -> check(model_name, options): raises what the factory would, cheaply
Check = Callable[[str, ProviderOptions], object]
_CHECKS: dict[str, Check] = {}
# Providers whose check reads files (imported for it: neither imports a vendor SDK).
_FILE_PROVIDERS = ("scripted", "local")


def register_check(prefix: str, check: Check) -> None:
    """Let `check_model` find a model's problem (a missing file) without
    building the provider: loading weights to validate a document is too dear."""
    _CHECKS[prefix] = check


def check_model(model: str, options: ProviderOptions, *, keys: bool = True) -> None:
    """Raise the error calling `model` would raise first, before any call:
    ProviderError for an unknown provider or a model file that does not exist,
    MissingCredentials (naming the variable to set) for a missing key.

    A provider a program registered itself is trusted with its own keys
    (tests register fakes under `openai`); `openai-compatible` servers often
    need no key, so only the built-in keyed providers are checked for one."""
    prefix, name = split_model(model)
    if prefix not in _FACTORIES and prefix not in _BUILTIN:
        raise ProviderError(f"unknown provider '{prefix}' in model '{model}' "
                            f"(known: {', '.join(known_prefixes())})")
    builtin = prefix in _BUILTIN and getattr(_FACTORIES.get(prefix), "__module__",
                                             _BUILTIN[prefix]) == _BUILTIN[prefix]
    variables = model_key_variables(model) if prefix != "openai-compatible" else ()
    if keys and builtin and variables:
        if not any(options.env.get(variable) for variable in variables):
            raise MissingCredentials(prefix, variables[0])
    if builtin and prefix in _FILE_PROVIDERS and prefix not in _CHECKS:
        try:
            importlib.import_module(_BUILTIN[prefix])
        except ImportError as exc:
            raise ProviderError(f"the '{prefix}' provider is not available: {exc}",
                                provider=prefix) from None
    check = _CHECKS.get(prefix) if builtin else None
    if check is not None:
        check(name, options)


def check_models(models: list[tuple], options: ProviderOptions, *,
                 keys: bool = True, files: bool = True) -> list[Problem]:
    """`check_model` for each (place, model, own key[, embedding]) of a document
    (`Workflow.models()`), as located problems; `files=False` leaves out the
    providers that read files (a server checks them only for users who may).
    An embedding model is checked as the embedder that would be built for it:
    the bundled one needs nothing, a hosted one its provider's key."""
    problems: list[Problem] = []
    for entry in models:
        where, model, own_key = entry[:3]
        if len(entry) > 3 and entry[3]:
            model, problem = _embedder_model(where, model)
            if problem is not None:
                problems.append(problem)
            if model is None:
                continue
        prefix = parse_model(model).provider
        if not files and prefix in _FILE_PROVIDERS:
            continue
        try:
            check_model(model, options, keys=keys and not own_key)
        except ProviderError as exc:
            message = str(exc)
            prefix_text = f"{exc.provider}: " if exc.provider else ""
            if prefix_text and message.startswith(prefix_text):
                message = message[len(prefix_text):]
            problems.append(Problem(where, f"model '{model}': {message}"))
    return problems


def _embedder_model(where: str, model: str) -> tuple[str | None, Problem | None]:
    """An embedding model as the provider model to check (a hosted one needs its
    key), or None: the bundled embedder needs nothing, and a name no embedder
    exists for is a problem (what `knowledge.embeddings.get_embedder` refuses)."""
    from flowforge.knowledge.embeddings import DEFAULT_MODEL as BUNDLED
    from flowforge.knowledge.embeddings import normalise_model_name

    name = normalise_model_name(model)
    if name == BUNDLED:
        return None, None
    if name.startswith(("openai/", "openai-compatible/")):
        return name, None
    return None, Problem(where, f"unknown embedding model '{model}': use {BUNDLED} (offline, "
                                f"the default), openai/text-embedding-3-small or "
                                f"openai-compatible/<model>")


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
