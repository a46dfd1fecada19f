"""How a block ended, as one value the scheduler passes along.

Before this, every place a block ended called `_finish` with six positional
arguments (`scope, node, FAILED, None, message, exc`), and a reader had to
count commas to know which was the error and which the output.  An `Outcome`
names them; the helpers below name the four ways a block can end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowforge.engine.scope import CANCELLED, FAILED, SUCCEEDED, WAITING

__all__ = ["Outcome", "succeeded", "failed", "cancelled", "waits"]


@dataclass(slots=True)
class Outcome:
    """A block's end: its status, its output (or a waiting block's state), the
    message shown for it (the error, or why it was cancelled or waits) and the
    exception behind a failure, kept for the failure's detail."""

    status: str
    output: Any = None
    error: str | None = None
    exc: BaseException | None = None


def succeeded(output: Any) -> Outcome:
    return Outcome(SUCCEEDED, output)


def failed(error: str, exc: BaseException | None = None) -> Outcome:
    return Outcome(FAILED, None, error, exc)


def cancelled(reason: str) -> Outcome:
    return Outcome(CANCELLED, None, reason)


def waits(state: Any, reason: str) -> Outcome:
    return Outcome(WAITING, state, reason)
