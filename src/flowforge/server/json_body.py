"""JSON response bodies written by orjson, not the standard library.

A run's result (`?wait=true`, `GET /api/runs/{id}`) carries every block's
output and every event, and the event loop writes it while it serves everyone
else: 16 runs whose values reached the 16 MB limit answered ~50 MB each, and
`json.dumps` held the loop for 2-4 s at a time (`bench/stalls.py --only
doubling`); orjson writes the same in a tenth of the time.  What the standard
encoder refused (NaN) is written as null, and a key that is not a string as
its text, as the store writes them (storage/encoding.py).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse

__all__ = ["FastJSONResponse"]

_OPTIONS = orjson.OPT_NON_STR_KEYS


class FastJSONResponse(JSONResponse):
    """A JSONResponse rendered by orjson (the same bytes for the same plain data)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=str, option=_OPTIONS)
