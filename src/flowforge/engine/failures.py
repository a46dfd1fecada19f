"""What a block failure tells the person who reads the run's events.

A failure flowforge expects - a workflow or run error, an invalid config, an
expression, a refused pattern, a budget, a capability, a provider's answer, a
`ValueError` (how blocks say an input is wrong) - is fully said by its
message: no traceback.  An unexpected one (a bug, in
flowforge or in a registered function) keeps its traceback for whoever runs
the process: in the run's events when the run is trusted (the CLI, the
Python API: the reader is the machine's owner, debugging), and on a server in
the server's log under a short error id, which is all the tenant's events
carry - a traceback shows the server's files and code to anyone who reads
the events over the API.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from typing import Any

from pydantic import ValidationError

from flowforge.errors import FlowforgeError

__all__ = ["failure_detail", "unexpected_detail", "EXPECTED"]

log = logging.getLogger("flowforge.errors")

#: failures whose message says everything (expressions, patterns, the schema
#: notation and structured answers raise ValueErrors)
EXPECTED: tuple[type[BaseException], ...] = (FlowforgeError, ValidationError, ValueError)


def failure_detail(exc: BaseException | None, trusted: bool, where: str = "") -> dict[str, Any]:
    """The fields an event about `exc` carries besides its message:
    `{}` (expected), `{"traceback": ...}` (trusted) or `{"error_id": ...}`
    (a server: the traceback is logged under that id, with `where`)."""
    if exc is None or isinstance(exc, EXPECTED):
        return {}
    return unexpected_detail(exc, trusted, where)


def unexpected_detail(exc: BaseException, trusted: bool, where: str = "") -> dict[str, Any]:
    """`{"traceback": ...}` when trusted, else `{"error_id": ...}` with the
    traceback logged under it (`exc` being unexpected, whatever its type)."""
    if trusted:
        return {"traceback": "".join(traceback.format_exception(exc))}
    error_id = uuid.uuid4().hex[:12]
    log.error("unexpected error %s (%s)", error_id, where or "a run",
              exc_info=(type(exc), exc, exc.__traceback__))
    return {"error_id": error_id}
