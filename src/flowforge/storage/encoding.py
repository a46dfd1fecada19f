"""JSON for stored columns, shared by every back end.

A run's record is JSON all the way down (each event, each block's inputs and
output), so encoding is most of what recording a run costs the event loop:
orjson does it about ten times faster than the standard library.  What orjson
refuses (an integer beyond 64 bits, a key it cannot turn into a string) falls
back to the standard library, so nothing that stored before fails to store now.
Text written by either reads back with either.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import orjson

__all__ = ["dumps", "dumps_utf8", "dumps_each", "dumps_utf8_each", "loads", "same_json"]

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> str | None:
    """`value` as JSON text (None stays None, for NULL).  Values JSON has no
    type for are stored as their `str()`; NaN and infinities as null."""
    encoded = dumps_utf8(value)
    return encoded.decode() if type(encoded) is bytes else encoded


def dumps_utf8(value: Any) -> bytes | str | None:
    """`value` as JSON, as orjson's UTF-8 bytes when it can (else `dumps`'s
    text): for a statement that stores them as text itself (SQLite's
    `CAST(? AS TEXT)`).  Turning megabytes of bytes into a Python str only
    for the database to turn it back into UTF-8 cost a fifth of a big
    event's commit, on the event loop."""
    if value is None:
        return None
    try:
        return orjson.dumps(value, default=str, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, default=str, ensure_ascii=False)


def dumps_utf8_each(values: Sequence[Any]) -> list[bytes | str | None]:
    """`dumps_utf8` of each value, in one comprehension (a group encodes
    thousands of events: a call of `dumps_utf8` each cost as much as orjson's
    work); a value orjson refuses sends them all through `dumps_utf8`."""
    try:
        return [_orjson_dumps(value, default=str, option=_OPTIONS) if value is not None
                else None for value in values]
    except (TypeError, orjson.JSONEncodeError):
        return [dumps_utf8(value) for value in values]


def dumps_each(values: Sequence[Any]) -> list[str | None]:
    """`dumps` of each value (text: for a back end that takes str)."""
    return [text.decode() if type(text) is bytes else text for text in dumps_utf8_each(values)]


_orjson_dumps = orjson.dumps


def loads(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:        # NaN, written by the standard library
        return json.loads(text)


def same_json(stored: str | None, new: str | bytes | None) -> bool:
    """Whether two stored texts hold the same value, whichever encoder wrote them
    (a run resumed after an upgrade replays events the old encoder stored);
    `new` may be `dumps_utf8`'s bytes."""
    if isinstance(new, bytes) and isinstance(stored, str):
        new = new.decode()
    if stored == new:
        return True
    if stored is None or new is None:
        return False
    try:
        return loads(stored) == loads(new)
    except ValueError:
        return False
