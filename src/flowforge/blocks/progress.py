"""`progress`: tell whoever watches the run how far it has come.

    - id: question_done
      type: progress
      with: {phase: question, percent: 33, message: Question improved,
             result: "{{question.result}}"}

Publishes one `progress` event carrying the fields given (the CLI's live
view, SSE and the WebSocket pass it on) and outputs the same fields, so a
workflow can mark its milestones, e.g. each finished phase of the research
orchestrator with that phase's result.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block

__all__ = ["ProgressBlock", "ProgressConfig"]


class ProgressConfig(BlockConfig):
    percent: float = Field(ge=0, le=100)
    """How much of the run is done, 0 to 100."""
    message: str = ""
    """A line for people watching."""
    phase: str | None = None
    """The stage just reached (e.g. `question`), for consumers that show phases."""
    result: Any = None
    """What the stage produced, sent with the event (templates give raw values)."""


@register_block
class ProgressBlock(BlockType):
    type_name = "progress"
    Config = ProgressConfig
    outputs = {
        "percent": Output("number", "How much of the run is done, 0 to 100."),
        "message": Output("string", "The line for people watching."),
        "phase": Output("string", "The stage reached, when `phase` is given."),
        "result": Output("any", "What the stage produced, when `result` is given."),
    }

    @classmethod
    async def run(cls, context: BlockContext, config: ProgressConfig) -> Any:
        percent = int(config.percent) if config.percent == int(config.percent) else config.percent
        output: dict[str, Any] = {"percent": percent, "message": config.message}
        if config.phase is not None:
            output["phase"] = config.phase
        if config.result is not None:
            output["result"] = config.result
        context.emit("progress", **output)
        return output
