""""Did you mean": the one way every message suggests the closest spelling.

A misspelt block id, field, capability, provider or document name gets the
same hint, worded the same, from the same matcher (difflib's ratio): a user
learns one shape, and a change of wording or threshold is made here once.
It sits in the foundation so that every layer, from storage to the CLI, can
use it.
"""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["closest", "did_you_mean", "suggestion", "CUTOFF"]

#: How close a spelling must be to be suggested (difflib's ratio, 0..1).
CUTOFF = 0.6


def closest(name: str, options: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The option closest to a mistyped `name`, or None when none is close."""
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name: str, options: Iterable[str], cutoff: float = CUTOFF, *,
                 suffix: str = "") -> str:
    """` - did you mean 'x'?` for the option closest to `name`, or "".
    `suffix` completes the suggestion (a provider suggested with its model: `/gpt-4o`)."""
    found = closest(name, options, cutoff)
    return suggestion(None if found is None else f"{found}{suffix}")


def suggestion(found: str | None) -> str:
    """The hint's words for a suggestion found another way (a model family's
    table), or "" for None."""
    return f" - did you mean '{found}'?" if found is not None else ""
