"""What a queued run carries about how it must run: its `run_queued` event,
written by whoever queued it (model, trusted or not, files root, resuming
choice, webhook delivery options; never a secret), read by every worker
and reaper that finds the run."""

from __future__ import annotations

from typing import Any

from flowforge.service.resuming import fail_cut_off, resume_cut_off

__all__ = ["how_queued", "how_queued_in", "born_on_pool", "resumes", "fail_cut_off_run"]


async def how_queued(storage: Any, run_id: str) -> dict[str, Any]:
    """The run's `run_queued` event (a run started in a process, cut off, then
    queued has none: it is trusted, as its process was)."""
    return how_queued_in(await storage.get_events(run_id))


def how_queued_in(events: list[dict[str, Any]]) -> dict[str, Any]:
    """`how_queued` from the run's events, already read."""
    for event in events:
        if event["type"] == "run_queued":
            return event
    return {"trusted": True}


async def born_on_pool(storage: Any, run_id: str) -> bool:
    """Whether the run was queued (its `run_queued` event says how it runs): such
    a run continues on the pool; one started in a process continues there."""
    return any(e["type"] == "run_queued" for e in await storage.get_events(run_id))


def resumes(how: dict[str, Any]) -> bool:
    """Whether a cut-off run is resumed: only if both this process (its
    `--no-resume`, FLOWFORGE_RESUME_CUT_OFF) and whoever queued the run (the
    choice stored in its `run_queued` event) resume cut-off runs."""
    return resume_cut_off() and how.get("resume_cut_off", True) is not False


async def fail_cut_off_run(storage: Any, run_id: str) -> bool:
    """`fail_cut_off`, its reason naming where resuming was turned off."""
    return await fail_cut_off(storage, run_id, where="here" if not resume_cut_off()
                              else "where the run was queued")
