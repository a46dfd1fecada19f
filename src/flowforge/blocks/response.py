"""`response`: what the run answers. A run's `outputs` are the response
blocks that ran, so routing between responses decides the answer."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block


class ResponseConfig(BlockConfig):
    message: Any = None
    """The answer: text, or any value (templates give raw values)."""
    data: Any = None
    """Structured payload returned beside (or instead of) the message."""
    status: int = Field(200, ge=100, le=599)
    """HTTP status the server answers with when this response is chosen."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers the server adds when this response is chosen."""
    metadata: Any = None
    """Anything returned beside the answer for whoever reads the run (Sim's response
    `metadata`): kept as given, templates resolved."""


@register_block
class ResponseBlock(BlockType):
    type_name = "response"
    pure = True                  # nothing outside the run sees it run
    Config = ResponseConfig
    outputs = {
        "message": Output("any", "The `message` given (absent when none is)."),
        "data": Output("any", "The `data` given (absent when none is)."),
        "status": Output("integer", "The `status` given (200 by default)."),
        "headers": Output("object", "The `headers` given (absent when none are)."),
        "metadata": Output("any", "The `metadata` given (absent when none is)."),
    }

    @classmethod
    def is_eager(cls, config: Any) -> bool:
        return True

    @classmethod
    async def run(cls, context: BlockContext, config: ResponseConfig) -> Any:
        return cls.run_now(context, config)

    @classmethod
    def run_now(cls, context: BlockContext, config: ResponseConfig) -> Any:
        output: dict[str, Any] = {}
        if config.message is not None:
            output["message"] = config.message
        if config.data is not None:
            output["data"] = config.data
        output["status"] = config.status
        if config.headers:
            output["headers"] = config.headers
        if config.metadata is not None:
            output["metadata"] = config.metadata
        return output
