"""`local/qwen2.5-0.5b`: the packaged model by name, its file checked before
llama.cpp reads it, and a bad file as one clear line.  Small fake files stand in
for the 491 MB one; one smoke test runs the real model for a few tokens."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from flowforge.errors import ProviderError
from flowforge.providers import local_models
from flowforge.providers.base import LLMRequest, Message
from flowforge.providers.local import LocalProvider, default_model_path
from flowforge.providers.local_models import QWEN, is_present, model_file
from flowforge.providers.resolve import (ProviderOptions, check_model, clear_provider_cache,
                                          resolve_model)

REPAIR = "`make install` (or `python -m flowforge.providers.local_models`)"


def _ask(provider, text="Hi", max_tokens=2):
    import asyncio

    return asyncio.run(provider.complete(LLMRequest(
        model="m", messages=[Message("user", text)], max_tokens=max_tokens, temperature=0)))


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_MODEL_CACHE", str(tmp_path / "cache"))
    clear_provider_cache()
    local_models._VERIFIED.clear()
    yield tmp_path / "cache"
    clear_provider_cache()


@pytest.mark.parametrize("alias", ["qwen2.5-0.5b", "Qwen2.5-Coder-0.5B-Instruct", "qwen"])
def test_the_model_string_and_its_aliases_name_the_file_in_the_model_cache(alias, empty_cache):
    provider, _ = resolve_model(f"local/{alias}")
    assert provider.path == str(empty_cache / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    assert provider.weights is QWEN


def test_an_uninstalled_model_is_one_line_naming_the_file_and_the_repair(empty_cache):
    provider, _ = resolve_model("local/qwen2.5-0.5b")
    with pytest.raises(ProviderError) as caught:
        _ask(provider)
    message = str(caught.value)
    assert f"the model file {model_file(QWEN)} for local/qwen2.5-0.5b is missing" in message
    assert REPAIR in message and "\n" not in message
    # flowforge validate says the same before any run
    with pytest.raises(ProviderError, match="is missing: run `make install`"):
        check_model("local/qwen2.5-0.5b", ProviderOptions())


def _small(tmp_path, content: bytes, recorded: bytes):
    """A packaged model whose recorded file is `recorded`, and a file holding `content`."""
    path = tmp_path / "small.gguf"
    path.write_bytes(content)
    weights = dataclasses.replace(QWEN, size=len(recorded),
                                  sha256=hashlib.sha256(recorded).hexdigest())
    return LocalProvider(path, weights=weights), path


@pytest.mark.parametrize("content, says", [
    (b"GGUF" + b"\0" * 60, "is incomplete or damaged (64 bytes, not 128)"),      # cut short
    (b"GGUF" + b"\1" * 124, "is corrupt (sha256 "),                            # other bytes
])
def test_a_cut_or_corrupt_model_file_never_reaches_llama_cpp(tmp_path, empty_cache, content,
                                                              says):
    provider, path = _small(tmp_path, content, b"GGUF" + b"\0" * 124)
    with pytest.raises(ProviderError) as caught:
        _ask(provider)
    message = str(caught.value)
    assert says in message and str(path) in message and REPAIR in message
    assert "\n" not in message


def test_a_file_that_is_not_gguf_or_is_cut_is_named_not_a_crash(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"<html>not a model</html>")
    with pytest.raises(ProviderError, match=r"junk.gguf is not a GGUF model \(it starts with"):
        _ask(LocalProvider(junk))
    cut = tmp_path / "cut.gguf"
    with open(default_model_path(), "rb") as whole:
        cut.write_bytes(whole.read(20_000))        # a real header, no tensors
    with pytest.raises(ProviderError, match="could not load the GGUF model .*cut.gguf .*"
                                            "truncated or damaged"):
        _ask(LocalProvider(cut))


def test_the_real_model_answers_with_its_chat_template_in_a_few_tokens():
    """The installed file (what `make test` installs first); without it, the named
    model is the clear error above and the default falls back to local/smollm2."""
    clear_provider_cache()
    if not is_present(QWEN):
        with pytest.raises(ProviderError, match="for local/qwen2.5-0.5b is (missing|incomplete)"):
            _ask(resolve_model("local/qwen2.5-0.5b")[0])
        return
    provider, _ = resolve_model("local/qwen2.5-0.5b")
    response = _ask(provider, "What is the capital of France? One word.", max_tokens=4)
    assert "paris" in response.text.lower()
    formatted = provider.loaded().format([{"role": "user", "content": "Hi"}]).prompt
    assert formatted.startswith("<|im_start|>system") and "<|im_start|>assistant" in formatted
    assert response.usage.completion_tokens <= 4
