"""Saved KV-cache states of a local model, so interleaved blocks keep their prefix.

llama.cpp already skips the part of a prompt that matches what its context
holds (one agent loop's turns share everything but the newest messages).  But
one context holds one conversation: when two blocks take turns (a chat agent
and an evaluator, a chain's steps, the same workflow run again) each throws
the other's prefix away, and on two cores a 1,000-token system prompt and tool
list costs ~25 s to evaluate again.  So before a call would discard a long
evaluated prefix, its sequence state (the KV cells alone, ~12 KB a token for
Qwen2.5-0.5B, not llama-cpp-python's `LlamaRAMCache` copy of the logits,
~300 MB a state for a 152k-token vocabulary) is saved here, and a later prompt
that shares more with a saved state than with the live one gets it back.

`FLOWFORGE_LOCAL_STATES` sets how many states a model keeps (default 4, 0
turns this off); at most `MAX_BYTES` in all.  `counters()` says how many
prompt tokens were sent and how many llama.cpp evaluated (the bench's figure
for what the cache saves).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["StateCache", "counters", "count", "common_prefix", "DEFAULT_STATES"]

DEFAULT_STATES = 4
MAX_BYTES = 512 << 20
#: a state is saved or restored only for at least this many tokens of prefix: below
#: it the copy is not worth it (and a system prompt is longer)
MIN_TOKENS = 64

_COUNTS = {"sent": 0, "evaluated": 0, "restored": 0}
_COUNTS_LOCK = threading.Lock()


def counters() -> dict[str, int]:
    """Prompt tokens sent to local models and evaluated by them, states restored
    (since the process started)."""
    with _COUNTS_LOCK:
        return dict(_COUNTS)


def count(sent: int, evaluated: int, restored: bool) -> None:
    with _COUNTS_LOCK:
        _COUNTS["sent"] += sent
        _COUNTS["evaluated"] += evaluated
        _COUNTS["restored"] += int(restored)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass
class _State:
    tokens: tuple[int, ...]
    data: Any                      # a ctypes byte array, handed back to llama.cpp as is
    size: int


@dataclass
class StateCache:
    """A few saved states of one model's context, most recently used last.
    Used only under the model's lock."""

    capacity: int = DEFAULT_STATES
    states: list[_State] = field(default_factory=list)

    def prepare(self, llama: Any, prompt: Sequence[int]) -> tuple[int, bool]:
        """Before evaluating `prompt`: keep the live prefix if it would be lost,
        bring back a saved one that covers more of the prompt.  Returns how many
        of the prompt's tokens llama.cpp will not evaluate, and whether a state
        was restored."""
        live = llama._input_ids.tolist()
        live_match = common_prefix(live, prompt)
        if self.capacity <= 0:
            return _reused(live_match, prompt), False
        best, best_match = None, 0
        for state in self.states:
            match = common_prefix(state.tokens, prompt)
            if match > best_match:
                best, best_match = state, match
        lost = len(live) - live_match      # evaluated tokens this prompt would discard
        if lost >= MIN_TOKENS and len(live) >= 2 * MIN_TOKENS and not any(
                common_prefix(s.tokens, live) >= len(live) - MIN_TOKENS for s in self.states):
            self._save(llama, live)
        if best is not None and best_match >= live_match + MIN_TOKENS:
            if self._restore(llama, best):
                self.states.remove(best)
                self.states.append(best)
                return _reused(best_match, prompt), True
        return _reused(live_match, prompt), False

    def _save(self, llama: Any, tokens: list[int]) -> None:
        from llama_cpp import llama_cpp

        ctx = llama._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        if not size or size > MAX_BYTES:
            return
        data = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, data, size, 0)
        if not written:
            return
        saved = _State(tuple(tokens), data, int(written))
        # a saved state that is (nearly) a prefix of this one is covered by it
        self.states = [s for s in self.states
                       if common_prefix(s.tokens, saved.tokens) < len(s.tokens) - MIN_TOKENS]
        self.states.append(saved)
        while self.states and (len(self.states) > self.capacity or
                               sum(s.size for s in self.states) > MAX_BYTES):
            self.states.pop(0)

    @staticmethod
    def _restore(llama: Any, state: _State) -> bool:
        from llama_cpp import llama_cpp

        ctx = llama._ctx.ctx
        llama._ctx.kv_cache_seq_rm(0, -1, -1)
        if not llama_cpp.llama_state_seq_set_data(ctx, state.data, state.size, 0):
            llama.reset()
            llama._ctx.kv_cache_seq_rm(0, -1, -1)
            return False
        n = len(state.tokens)
        llama.input_ids[:n] = state.tokens
        llama.n_tokens = n
        llama._requires_eval = True       # logits are not restored: evaluate a token again
        return True


def _reused(match: int, prompt: Sequence[int]) -> int:
    """Tokens llama.cpp skips: the matched prefix, less one when it covers the whole
    prompt (that token is evaluated again for fresh logits)."""
    return min(match, len(prompt) - 1) if match else 0
