"""Find a lone UTF-16 surrogate in a JSON body, and say where it is.

JSON may spell a character as `\\ud83d\\ude00` (a surrogate pair); one half
alone (`"\\ud800"`) parses in Python but is not Unicode text: encoding it for
the database, a webhook or a log fails later with a UnicodeEncodeError.  So a
body holding one is refused up front as a located 422 (`body.inputs.name`).

Scanning the raw bytes is not enough: `"\\\\ud800"` is an escaped backslash
followed by the letters `ud800`, valid text that a regex alone would refuse
(a JavaScript-style emoji pattern in a document reads like that).  A cheap
regex only decides whether to look; the parsed value decides.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["lone_surrogate"]

_MAYBE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(body: bytes) -> tuple[str, str] | None:
    """`(where, message)` for the first string (key or value) of a JSON body
    that holds a lone surrogate; None when there is none or the body is not
    JSON (other checks and the routes answer that)."""
    if not _MAYBE.search(body):
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("body", data)]
    while stack:                      # iterative: a deep body must not recurse here
        where, value = stack.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found is not None:
                return where, _message(found.group(), found.start())
        elif isinstance(value, dict):
            for key in value:
                found = _SURROGATE.search(key)
                if found is not None:
                    return f"{where}.{_SURROGATE.sub('?', key)}", (
                        "the key " + _message(found.group(), found.start()))
            stack.extend((f"{where}.{key}", item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{where}[{index}]", item)
                         for index, item in reversed(list(enumerate(value))))
    return None


def _message(char: str, at: int) -> str:
    return (f"holds a lone surrogate \\u{ord(char):04x} at character {at}: it is not valid "
            f"Unicode text (only a high surrogate followed by a low one is); remove it")
