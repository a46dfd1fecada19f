"""The routing rule's edges: what a settled block means for the blocks after it.

Each settled block walks its outgoing edges once (`Node.out`).  A required
edge that did not run blocks its dependant (`Scope.blocked`) with a rank, so
that the strongest reason wins whatever order the dependencies settle in; a
join member that ran counts (`Scope.active`).  The ranks, weakest first:

- `NOT_TAKEN`: a router, condition or approval chose another route (or a
  handler was not needed).  The dependant is skipped.
- `HELD`: a dependency waits for a person or a time.  The dependant is
  pending, not skipped: it runs, or the route skips it, once the run is
  resumed.  Its reason is the id of the block it waits for.
- `CANCELLED`: a dependency was cancelled.
- `FAILURE`: a dependency failed and nothing handles it.  This outranks a
  wait: such a block can never run, whatever the decision.
"""

from __future__ import annotations

from typing import Any

from flowforge.engine.scope import CANCELLED, FAILED, PENDING, SKIPPED, SUCCEEDED, WAITING, Scope
from flowforge.workflow.graph import ALTERNATIVE, ON_FAILURE, Node

__all__ = ["NOT_TAKEN", "HELD", "CANCELLED_RANK", "FAILURE", "mark_edges", "block", "miss"]

NOT_TAKEN, HELD, CANCELLED_RANK, FAILURE = 0, 1, 2, 3


def mark_edges(scope: Scope, node: Node, status: str, targets: tuple[str, ...] | None,
               queue: Any) -> None:
    """Settle the outgoing edges of a block that routed, failed, waited, was
    skipped, held or cancelled: which dependants it ran for, and why not;
    each dependant whose last dependency this was joins `queue`."""
    nid = node.id
    if status == SUCCEEDED:
        why = (NOT_TAKEN, "not on the chosen route")
    elif status == FAILED:
        handler = node.spec.on_error
        why = (FAILURE, f"dependency '{nid}' failed") if handler is None else \
            (NOT_TAKEN, f"'{nid}' failed and its on_error block '{handler}' runs instead")
    elif status == WAITING:
        why = (HELD, nid)
    elif status in (SKIPPED, PENDING):
        blocked = scope.blocked
        why = blocked[nid] if blocked is not None and nid in blocked \
            else (NOT_TAKEN, "not on the chosen route")
    else:
        why = (CANCELLED_RANK, f"dependency '{nid}' was cancelled")
    pending = scope.pending
    for dep_id, mode in node.out:
        if mode & ON_FAILURE:
            ran = status == FAILED
            rank, reason = why if status != SUCCEEDED else \
                (NOT_TAKEN, f"not needed: '{nid}' did not fail")
        else:
            ran = status == SUCCEEDED and (targets is None or dep_id in targets)
            rank, reason = why
        if ran:
            if mode & ALTERNATIVE:
                scope.active[dep_id] += 1
        else:
            miss(scope, dep_id, mode, rank, reason)
        left = pending[dep_id] - 1
        pending[dep_id] = left
        if left == 0:
            queue.append((scope, dep_id))


def miss(scope: Scope, nid: str, mode: int, rank: int, reason: str) -> None:
    """A dependency did not run for `nid`: a required one blocks it; a join
    member only says why, should no member run - unless it failed or waits,
    which holds back everything downstream."""
    if mode & ALTERNATIVE and rank == NOT_TAKEN:
        if scope.missed is None:
            scope.missed = {}
        scope.missed.setdefault(nid, reason)
    else:
        block(scope, nid, rank, reason)


def block(scope: Scope, nid: str, rank: int, reason: str) -> None:
    """Record why `nid` will not run now; the higher rank wins (the first one
    of a rank stays)."""
    blocked = scope.blocked
    if blocked is None:
        scope.blocked = {nid: (rank, reason)}
        return
    held = blocked.get(nid)
    if held is None or held[0] < rank:
        blocked[nid] = (rank, reason)
