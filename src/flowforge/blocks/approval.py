"""`approval`: the run waits for a person to approve or reject.

The first time it runs, the block shows what is to be approved (`message`
and `data`, templated) in an `approval_requested` event and raises `Suspend`:
the run ends `waiting`, nothing held in memory.  A permitted user decides
(`POST /api/runs/{id}/approvals/{block}`, `flowforge runs approve|reject`);
the run is then resumed from its checkpoints with the decision injected
(`context.resume_state["decision"]`), and this block settles with it.

Approval routes like a condition: every block after it runs when approved;
when rejected only `on_reject` runs (the others are skipped), or, without
`on_reject`, the block fails and so does the run.  With `timeout` (seconds)
the run is due for a resumer when the time is up, and then takes `default`
(or fails, without one).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output, Routed, Suspend
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, Problem
from flowforge.workflow.model import BlockSpec

__all__ = ["ApprovalConfig", "ApprovalBlock", "DECISIONS"]

DECISIONS = ("approve", "reject")


class ApprovalConfig(BlockConfig):
    message: str = "Approve?"
    """What the person is asked (templates allowed: `Refund {{input.amount}} EUR?`)."""
    data: Any = None
    """What they need to decide: any value, templates give raw values."""
    timeout: float | None = Field(None, gt=0)
    """Seconds to wait for a decision; then `default` is taken (or the block fails)."""
    default: Literal["approve", "reject"] | None = None
    """The decision when `timeout` passes without one."""
    on_reject: str | None = None
    """Block to run when rejected (the other blocks after this one are skipped);
    without it a rejection fails the run."""


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


@register_block
class ApprovalBlock(BlockType):
    type_name = "approval"
    Config = ApprovalConfig
    outputs = {
        "decision": Output("`approve` or `reject`", "What was decided (the `default` when "
                           "the timeout decided)."),
        "approved": Output("boolean", "True when approved."),
        "by": Output("string or null", "Who decided; null when the timeout did."),
        "at": Output("string", "When it was decided (ISO 8601, UTC)."),
        "comment": Output("string or null", "The decider's comment."),
        "timed_out": Output("boolean", "True when the timeout took the default decision."),
        "message": Output("string", "The `message` shown for approval."),
        "data": Output("any", "The `data` shown for approval."),
        "requested_at": Output("string", "When approval was asked for (ISO 8601, UTC)."),
        "selectedPath": Output("{blockIds}", "The blocks that run after it: every one when "
                               "approved, `on_reject` when rejected."),
    }
    routes = True
    holds_slot = False

    @classmethod
    def implied_targets(cls, spec: BlockSpec) -> list[str]:
        target = spec.with_.get("on_reject")
        return [target] if isinstance(target, str) else []

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        if spec.with_.get("default") is not None and spec.with_.get("timeout") is None:
            return [Problem(f"{where}.with.default", "a default decision is taken when the "
                                                     "`timeout` passes: set `timeout` too")]
        return []

    @classmethod
    async def run(cls, context: BlockContext, config: ApprovalConfig) -> Any:
        if context.services.get("storage") is None:
            raise BlockError(context.block_id, "approval", "an approval needs the run to be "
                             "stored so it can wait and be resumed: run with storage (not "
                             "`storage=False` / `--no-store`)")
        state = getattr(context, "resume_state", None)
        now = time.time()
        if not state or "requested_at" not in state:
            timeout_at = now + config.timeout if config.timeout is not None else None
            state = {"message": config.message, "data": config.data, "requested_at": now,
                     "timeout_at": timeout_at}
            context.emit("approval_requested", message=config.message, data=config.data,
                         timeout_at=timeout_at, default=config.default)
        decision = state.get("decision")
        timed_out = False
        if decision is None:
            timeout_at = state.get("timeout_at")
            if timeout_at is None or now < timeout_at:
                shown = {k: v for k, v in state.items() if k != "decision"}
                raise Suspend(shown, timeout_at, "waiting for approval")
            if config.default is None:
                raise BlockError(context.block_id, "approval",
                                 f"no decision within {config.timeout:g} s (timed out at "
                                 f"{_iso(timeout_at)}) and no `default` decision")
            decision = {"decision": config.default, "by": None, "at": now,
                        "comment": "timed out: the default decision"}
            timed_out = True
        choice = decision.get("decision")
        output = {"decision": choice, "approved": choice == "approve",
                  "by": decision.get("by"), "at": _iso(decision.get("at") or now),
                  "comment": decision.get("comment"), "timed_out": timed_out,
                  "message": state.get("message"), "data": state.get("data"),
                  "requested_at": _iso(state["requested_at"])}
        context.emit("approval_decided", **{k: output[k] for k in
                                            ("decision", "by", "at", "comment", "timed_out")})
        successors = [node.id for node in context.successors()]
        if choice == "approve":
            targets = tuple(t for t in successors if t != config.on_reject)
        elif config.on_reject is not None:
            targets = (config.on_reject,)
        else:
            who = output["by"] or "the timeout"
            comment = f": {output['comment']}" if output["comment"] else ""
            raise BlockError(context.block_id, "approval", f"rejected by {who}{comment}")
        output["selectedPath"] = {"blockIds": list(targets)}
        return Routed(output, targets)
