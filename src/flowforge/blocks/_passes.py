"""A server's cap on the passes of one `loop` and the items of one `parallel`.

One user's loop of 100,000 passes published 200,004 events and, four at once,
held a server for 12 s.  On a server (`max_loop_passes` in the run's
services) a container that would pass the cap fails, naming itself and the
setting, before it does the work when the count is known up front (a list,
`times`) and when it reaches the cap otherwise (`until`).  Locally there is
no cap: the document's own `max_iterations` is the only bound.
"""

from __future__ import annotations

from typing import Any

from flowforge.errors import RunError

__all__ = ["pass_cap", "too_many"]


def pass_cap(context: Any) -> int | None:
    """This run's cap on passes per container, or None."""
    return context.services.get("max_loop_passes")


def too_many(context: Any, count: int | str, what: str) -> RunError:
    """The failure of a container that would run more than the cap."""
    return RunError(f"{context.node.type} '{context.block_id}' would run {count} {what}, "
                    f"more than this server's limit of {pass_cap(context)} per block "
                    f"(FLOWFORGE_MAX_LOOP_PASSES, `flowforge serve --max-loop-passes`): "
                    f"split the work or ask an administrator to raise the limit")
