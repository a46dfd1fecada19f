"""Block fields as the seed systems write them, read as flowforge's own.

Users of the Sim-style block executor write `systemPrompt`, `userPrompt`,
`maxTokens`, `responseFormat`, `apiKey`, a knowledge block's
`knowledgeBaseId`, `topK` and `tagFilters`.  flowforge's canonical names are
snake_case (`system`, `prompt`, `max_tokens`, `response_format`, `api_key`,
`knowledge_base`, `top_k`, `filters`): both are accepted, and the seed's name
is renamed once, when the document is compiled, so that everything after it
(policy checks, the masking of `api_key` in records, the run) sees one name.
A block type lists its own renames that no rule can guess (`seed_fields`);
any other camelCase key whose snake_case form is one of the block's fields is
renamed by the rule.  Giving both spellings of one field is an error: the
document would say two things.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

__all__ = ["canonical_fields", "snake_case"]

_UPPER = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(name: str) -> str:
    """`maxTokens` -> `max_tokens`."""
    return _UPPER.sub("_", name).lower()


def canonical_fields(with_: Mapping[str, Any], fields: Iterable[str],
                     renames: Mapping[str, str] | None = None
                     ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """`with_` with seed names renamed to the canonical field names, and the
    problems found as `(key, message)`.  `fields` are the block's config fields;
    `renames` the block type's own seed names (seed -> canonical)."""
    known = set(fields)
    out: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    renamed: dict[str, str] = {}
    for key, value in with_.items():
        target = key
        if key not in known:
            explicit = (renames or {}).get(key)
            if explicit is not None and explicit in known:
                target = explicit
            elif snake_case(key) in known:
                target = snake_case(key)
        if target != key:
            renamed[target] = key
        out.setdefault(target, value)
    for target, seed in renamed.items():
        if target in with_:
            problems.append((seed, f"`{seed}` and `{target}` are the same field (`{target}` "
                                   f"is the canonical name): keep one"))
    return out, problems
