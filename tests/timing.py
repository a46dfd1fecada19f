"""Time bounds that hold on a shared 2-core machine: a blow-up (a budget that
does not hold, an alias bomb, a quadratic parse) is slow every time, while one
slow try while another process has the core is noise.  So a bounded piece of
work is timed up to a few times, stopping at the first try under the bound."""

from __future__ import annotations

import time
from typing import Any, Callable


def fastest(work: Callable[[], Any], under: float, tries: int) -> tuple[Any, float]:
    """(what the last try of `work()` returned, the fastest try's seconds), after
    at most `tries` tries, stopping at the first that took less than `under`."""
    best, result = float("inf"), None
    for _ in range(tries):
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
        if best < under:
            break
    return result, best
