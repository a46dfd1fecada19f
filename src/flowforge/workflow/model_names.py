"""Bare model names of well-known families, read as `provider/model`.

flowforge's model strings name their provider (`openai/gpt-4o`); documents
written for the Sim-style block executor, and people, write `model: gpt-4o`,
`claude-3-5-sonnet-latest`, `gemini-1.5-pro` or an Ollama name such as
`llama3.1`.  A name of one of the families below is read as its provider's
(`gpt-4o` -> `openai/gpt-4o`, `llama3.1` -> `openai-compatible/ollama/llama3.1`)
once, when the document is compiled, and `validate` prints each choice as a
warning; a bare name of no known family stays an error (the service's model
check says so, with the closest well-known name).  The table lives here, in
the foundation (`flowforge.model_strings`, with every other reading of a
model string); this module rewrites the document with it, and the
providers resolve only full strings.
"""

from __future__ import annotations

from typing import Any

from flowforge.errors import Problem
from flowforge.model_strings import qualified

__all__ = ["qualify_models"]

def qualify_models(doc: Any) -> list[Problem]:
    """Rewrite, in place, every bare model name of a known family that `doc`
    names where `Workflow.models()` looks (defaults, each block's `model` and
    `fallback`, the blocks an agent calls as tools), and return one warning
    per rewrite, located (`blocks[2].with.model: 'gpt-4o' read as openai/gpt-4o`)."""
    notes: list[Problem] = []

    def fix(holder: Any, key: Any, where: str) -> None:
        value = holder[key]
        full = qualified(value)
        if full is not None:
            holder[key] = full
            notes.append(Problem(where, f"'{value}' read as {full}"))

    def fix_with(with_: Any, where: str) -> None:
        if not isinstance(with_, dict):
            return
        if "model" in with_:
            fix(with_, "model", f"{where}.model")
        fallback = with_.get("fallback")
        for index in range(len(fallback) if isinstance(fallback, list) else 0):
            fix(fallback, index, f"{where}.fallback[{index}]")

    fix_with(doc.defaults, "defaults")
    stack = [(f"{where}.with", spec.with_) for where, spec in doc.iter_blocks()][::-1]
    while stack:
        where, with_ = stack.pop()
        if not isinstance(with_, dict):
            continue
        fix_with(with_, where)
        tools = with_.get("tools")
        stack.extend((f"{where}.tools[{index}].block.with", entry["block"].get("with"))
                     for index, entry in reversed(list(enumerate(
                         tools if isinstance(tools, list) else [])))
                     if isinstance(entry, dict) and isinstance(entry.get("block"), dict))
    return notes
