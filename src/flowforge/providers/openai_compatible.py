"""`openai-compatible/<server>/<model>`: any server speaking OpenAI's Chat
Completions API - Ollama, vLLM, LM Studio, llama.cpp's server, OpenRouter,
Azure OpenAI - through the official `openai` SDK.

Where each setting comes from, first found wins (`<NAME>` is the server name
upper-cased, other characters as `_`: `my-vllm` -> `MY_VLLM`):

- base URL: `base_url` in the block / defaults (`LLMRequest.extra`), else
  `OPENAI_COMPATIBLE_<NAME>_BASE_URL`, else the preset (see `PRESETS`);
- key (optional): the variable named by `api_key_env`, else
  `OPENAI_COMPATIBLE_<NAME>_API_KEY`, else the preset's (`OPENROUTER_API_KEY`,
  `AZURE_OPENAI_API_KEY`); servers that need none get a placeholder;
- model: the part after `<server>/`, else `model` in the block, else
  `OPENAI_COMPATIBLE_<NAME>_MODEL`;
- structured output: `response_format_style`, else
  `OPENAI_COMPATIBLE_<NAME>_RESPONSE_FORMAT`, else `json_schema`.

So `openai-compatible/ollama/llama3.2` works with no setting at all (Ollama on
its default port), and `OPENAI_COMPATIBLE_MYBOX_BASE_URL=http://10.0.0.5:8000/v1`
makes `openai-compatible/mybox/Qwen2.5-7B-Instruct` reach a vLLM server.
Keys are never written in a workflow, only the name of the variable holding one.

Azure OpenAI (`openai-compatible/azure/<deployment>`): the endpoint is
`base_url` / `OPENAI_COMPATIBLE_AZURE_BASE_URL` / `AZURE_OPENAI_ENDPOINT`, the API
version `api_version` / `OPENAI_COMPATIBLE_AZURE_API_VERSION` /
`AZURE_OPENAI_API_VERSION` / `OPENAI_API_VERSION`, the key
`AZURE_OPENAI_API_KEY`.

`response_format_style: json_object` is for llama-cpp-python's own server,
which takes a schema as `{"type": "json_object", "schema": ...}`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

import openai as _sdk

from flowforge.errors import MissingCredentials, ProviderError
from flowforge.model_strings import COMPATIBLE, parse_model
from flowforge.providers.base import (DeltaCallback, LLMRequest, LLMResponse, Provider,
                                      grammar_schema, is_loopback_url)
from flowforge.providers.openai import OpenAIChatProvider
from flowforge.providers.resolve import ProviderOptions, register_provider

__all__ = ["OpenAICompatibleProvider", "PRESETS", "Preset", "variable_prefix"]


@dataclasses.dataclass(frozen=True)
class Preset:
    base_url: str | None = None
    key_variable: str | None = None       # a variable that may hold the key
    key_required: bool = False


PRESETS: dict[str, Preset] = {
    "ollama": Preset("http://127.0.0.1:11434/v1"),
    "lmstudio": Preset("http://127.0.0.1:1234/v1"),
    "lm-studio": Preset("http://127.0.0.1:1234/v1"),
    "vllm": Preset("http://127.0.0.1:8000/v1"),
    "llamacpp": Preset("http://127.0.0.1:8080/v1"),
    "llama-cpp": Preset("http://127.0.0.1:8080/v1"),
    "openrouter": Preset("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True),
    "azure": Preset(None, "AZURE_OPENAI_API_KEY", True),
}

_STYLES = ("json_schema", "json_object")


def variable_prefix(server: str) -> str:
    """`my-vllm` -> `OPENAI_COMPATIBLE_MY_VLLM_`."""
    return "OPENAI_COMPATIBLE_" + re.sub(r"[^A-Za-z0-9]", "_", server).upper() + "_"


class OpenAICompatibleProvider(Provider):
    """One named server; clients are made per distinct (URL, key, version) and reused."""

    def __init__(self, server: str, env: Mapping[str, str], http_client: Any = None) -> None:
        self.server = server
        self.name = f"openai-compatible/{server}"
        self.env = env
        self.preset = PRESETS.get(server.lower(), Preset())
        self.http_client = http_client
        self._clients: dict[tuple[Any, ...], OpenAIChatProvider] = {}

    def _setting(self, extra: dict[str, Any], key: str, suffix: str,
                 *fallbacks: str) -> str | None:
        value = extra.get(key) or self.env.get(variable_prefix(self.server) + suffix)
        for name in fallbacks:
            value = value or self.env.get(name)
        return value or None

    def _key(self, extra: dict[str, Any]) -> str:
        names = [extra["api_key_env"]] if extra.get("api_key_env") else []
        names.append(variable_prefix(self.server) + "API_KEY")
        if self.preset.key_variable:
            names.append(self.preset.key_variable)
        for name in names:
            if self.env.get(name):
                return self.env[name]
        if self.preset.key_required or extra.get("api_key_env"):
            raise MissingCredentials(self.name, names[-1] if not extra.get("api_key_env")
                                     else names[0])
        return "not-needed"   # the SDK insists on a key; local servers ignore it

    def inner(self, request: LLMRequest) -> OpenAIChatProvider:
        """The configured Chat Completions provider for this request's settings."""
        extra = request.extra or {}
        prefix = variable_prefix(self.server)
        style = self._setting(extra, "response_format_style", "RESPONSE_FORMAT") or "json_schema"
        if style not in _STYLES:
            raise ProviderError(f"response format style '{style}' is not one of "
                                f"{', '.join(_STYLES)}", provider=self.name)
        key = self._key(extra)
        if self.server.lower() == "azure":
            endpoint = self._setting(extra, "base_url", "BASE_URL", "AZURE_OPENAI_ENDPOINT")
            version = self._setting(extra, "api_version", "API_VERSION",
                                    "AZURE_OPENAI_API_VERSION", "OPENAI_API_VERSION")
            if not endpoint or not version:
                missing = "AZURE_OPENAI_ENDPOINT" if not endpoint else "AZURE_OPENAI_API_VERSION"
                raise ProviderError(f"Azure OpenAI needs an endpoint and an API version: set "
                                    f"{missing} (or `base_url` / `api_version` in the block)",
                                    provider=self.name)
            config: tuple[Any, ...] = ("azure", endpoint, key, version, style)
        else:
            base_url = self._setting(extra, "base_url", "BASE_URL") or self.preset.base_url
            if not base_url:
                raise ProviderError(f"no base URL for OpenAI-compatible server '{self.server}': "
                                    f"set {prefix}BASE_URL (e.g. http://127.0.0.1:11434/v1) or "
                                    f"`base_url` in the block or the workflow's defaults",
                                    provider=self.name)
            config = ("openai", base_url, key, None, style)
        if config not in self._clients:
            if config[0] == "azure":
                client = _sdk.AsyncAzureOpenAI(azure_endpoint=config[1], api_key=key,
                                               api_version=config[3], max_retries=0,
                                               http_client=self.http_client)
            else:
                client = _sdk.AsyncOpenAI(base_url=config[1], api_key=key, max_retries=0,
                                          http_client=self.http_client)
            self._clients[config] = OpenAIChatProvider(
                self.name, client, response_format_style=style,
                remote=not is_loopback_url(config[1]))
        return self._clients[config]

    def model_for(self, request: LLMRequest) -> str:
        model = request.model or (request.extra or {}).get("model") or \
            self.env.get(variable_prefix(self.server) + "MODEL")
        if not model:
            raise ProviderError(f"no model named for '{self.name}': write "
                                f"'openai-compatible/{self.server}/<model>' or set "
                                f"{variable_prefix(self.server)}MODEL", provider=self.name)
        return model

    def unsent(self, request: LLMRequest) -> dict[str, str]:
        return self.inner(request).unsent(request)

    def defaults_sent(self, request: LLMRequest) -> dict[str, Any]:
        sent = dataclasses.replace(request, model=self.model_for(request))
        named = {} if request.model else {"model": sent.model}   # from extra or …_MODEL
        return {**named, **self.inner(sent).defaults_sent(sent)}

    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        sent = dataclasses.replace(request, model=self.model_for(request))
        if request.tools and self.server.lower() != "azure":
            # local servers (llama.cpp, vLLM, Ollama) compile tool schemas into grammars;
            # the agent still validates every call against the full schema
            sent = dataclasses.replace(sent, tools=[
                dataclasses.replace(tool, parameters=grammar_schema(tool.parameters))
                for tool in request.tools])
        return await self.inner(request).complete(sent, on_delta)

    async def aclose(self) -> None:
        for provider in self._clients.values():
            await provider.aclose()


def _factory(name: str, options: ProviderOptions) -> tuple[Provider, str]:
    parsed = parse_model(f"{COMPATIBLE}/{name}")
    return OpenAICompatibleProvider(parsed.server, options.env), parsed.served_name


register_provider("openai-compatible", _factory)
