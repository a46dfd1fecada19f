"""A run's block checkpoints, read from its event log.

Every block event (`block_started`, `block_succeeded`, ...) already holds what
a block's checkpoint is: its status, inputs, output, error and times.  Writing
the same again as a block row, twice per block (running, then its outcome),
was 10 of the 24 rows a 5-block run stored and the costliest kind (an
upsert): recording 500 concurrent runs spent a fifth of its time on them.
So a run records its events only, and `get_blocks` folds them.

Rows are still stored for what no event says: the decision taken on a
waiting approval, the reason a cut-off block got, and the rows of runs
recorded before this change.  `merged` lays such a row over the fold of its
block when the row is about the block's current state (same status, or no
status); a row left behind by a later state (a block cut off, then run again
on resume) gives way to the events.
"""

from __future__ import annotations

from typing import Any, Iterable

from flowforge.storage.base import BLOCK_FIELDS

__all__ = ["BLOCK_EVENT_TYPES", "fold", "merged", "pending_reason"]

_STATUS = {"block_started": "running", "block_succeeded": "succeeded",
           "block_failed": "failed", "block_skipped": "skipped",
           "block_cancelled": "cancelled", "block_waiting": "waiting"}

#: The event types a checkpoint is folded from (a stop's `run_waiting` names
#: the blocks it holds pending).
BLOCK_EVENT_TYPES = (*_STATUS, "run_waiting")

_EMPTY = dict.fromkeys(BLOCK_FIELDS)


def fold(run_id: str, events: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each block's checkpoint (a row of BLOCK_FIELDS), by (scope, block_id), in
    the order the blocks first appear.  An event replayed on resume (`resumed`)
    is skipped: the restored block keeps its first outcome and times."""
    blocks: dict[tuple[str, str], dict[str, Any]] = {}
    for event in events:
        status = _STATUS.get(event["type"])
        if status is None or event.get("resumed"):
            if event["type"] == "run_waiting":
                _pending(run_id, event, blocks)
            continue
        key = (event.get("scope") or "", event["block_id"])
        row = blocks.get(key)
        if row is None:
            row = blocks[key] = {**_EMPTY, "run_id": run_id, "scope": key[0],
                                 "block_id": key[1]}
        row["status"] = status
        if event.get("block_type"):
            row["type"] = event["block_type"]
        if status == "running":
            row["inputs"] = event.get("inputs")
            row["started_at"] = event.get("time")
            row["reason"] = None                # a block held pending starts afresh
        else:
            row["finished_at"] = event.get("time")
            if status == "succeeded":
                row["output"] = event.get("output")
                row["duration_ms"] = event.get("duration_ms")
            elif status == "failed":
                row["error"] = event.get("error")
            else:
                row["reason"] = event.get("reason")
                if status == "waiting":         # the state to resume from
                    row["output"] = event.get("output")
    return blocks


def _pending(run_id: str, event: dict[str, Any],
             blocks: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The blocks a run's stop holds back (its `run_waiting` names them): each
    is `pending`, with the block it waits for as its reason."""
    for block_id, waiting_for in (event.get("pending") or {}).items():
        key = ("", block_id)
        row = blocks.get(key)
        if row is None:
            row = blocks[key] = {**_EMPTY, "run_id": run_id, "scope": "", "block_id": block_id}
        row["status"] = "pending"
        row["reason"] = pending_reason(waiting_for)


def pending_reason(waiting_for: str) -> str:
    """What a pending block's record says, in the run's result and its stored
    checkpoint alike: the block it waits for."""
    return f"waiting for '{waiting_for}'; runs when the run is resumed"


def merged(folded: dict[tuple[str, str], dict[str, Any]],
           rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checkpoints: the fold of the events with the stored rows laid over
    it (a row's values that are not None win) where the row is about the
    block's current state; rows of blocks without events come after, in the
    order they were stored."""
    out = dict(folded)
    for row in rows:
        key = (row.get("scope") or "", row["block_id"])
        current = out.get(key)
        if current is None:
            out[key] = row
        elif row.get("status") in (None, current["status"]):
            out[key] = {**current, **{k: v for k, v in row.items() if v is not None}}
    return list(out.values())
