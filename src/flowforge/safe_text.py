"""Text shown to people: one cleaning for every place it is shown.

A chat answer, its `formatted_response`, a session's title and the question
that becomes both are plain text, but clients render them: a web page that
puts them in a Markdown or HTML view runs `<img src=x onerror=...>` or
follows a `javascript:` link, and a terminal or an editor reorders a line
around an invisible U+202E.  So every such text passes through `shown_text`:

- `clean_text`: C0/C1 controls (tab and newline kept), zero-width marks and
  bidirectional overrides and isolates removed;
- `strip_markup`: every HTML element removed by nh3 (ammonia's HTML5 parser,
  the maintained one; a hand-written regex misses `<img/src=x onerror=...>`
  and friends).  The contents of `script` and `style` go with them, the text
  of other elements stays.  The result is plain text again (entities
  decoded), cleaned until nothing changes, so `&lt;script&gt;` cannot turn
  into a tag once decoded; then links whose scheme runs code
  (`javascript:`, `vbscript:`, `data:`) are dropped, Markdown's
  `[text](javascript:...)` keeping its text.  An autolink `<https://...>`
  keeps its address.

"a < b & c" stays as written: only what a browser would read as markup goes.
"""

from __future__ import annotations

import html
import re

__all__ = ["clean_text", "strip_markup", "shown_text"]

# C0/C1 controls (tab and newline kept), zero-width and bidirectional marks,
# overrides and isolates: invisible, they hide or reorder what a reader sees.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f"
                      "\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

# a scheme that runs code when followed; letters may be split by spaces (browsers
# drop tabs and newlines inside a URL)
_SCHEME = r"(?:j\s*a\s*v\s*a\s*s\s*c\s*r\s*i\s*p\s*t|v\s*b\s*s\s*c\s*r\s*i\s*p\s*t|d\s*a\s*t\s*a)\s*:"
_MD_LINK = re.compile(r"\[([^\]\n]*)\]\(\s*<?" + _SCHEME + r"(?:[^()\n]|\([^()\n]*\))*\)",
                      re.IGNORECASE)
# outside a link only a written-out address counts ("the data: 5 rows" is prose)
_BARE = re.compile(r"(?<![\w-])(?:(?:javascript|vbscript):(?=\S)|data:[\w.+-]+/[\w.+-]+)"
                   r"[^\s\]>\"']*", re.IGNORECASE)
# `<https://...>` and `<name@host>` are a Markdown autolink to a reader, an
# element to an HTML parser: kept as the address, without the brackets
_AUTOLINK = re.compile(r"<((?:https?://|mailto:)[^\s<>\"]+|[^\s<>@\"/]+@[^\s<>\"/]+)>",
                       re.IGNORECASE)

_ROUNDS = 8          # each round undoes one layer of escaping; real text needs one or two


def clean_text(text: str) -> str:
    """`text` without control, zero-width and bidirectional-override characters."""
    return _CONTROL.sub("", text)


def strip_markup(text: str) -> str:
    """`text` as plain text: no HTML element, no code-running link."""
    import nh3

    text = _AUTOLINK.sub(lambda m: m.group(1), text)
    for _ in range(_ROUNDS):
        cleaned = html.unescape(nh3.clean(text, tags=set(), attributes={},
                                          strip_comments=True))
        if cleaned == text:
            break
        text = cleaned
    else:                   # still changing: whatever is left is escaped, never markup
        text = html.escape(text, quote=False)
    text = _MD_LINK.sub(lambda m: m.group(1), text)
    return _BARE.sub("", text)


def shown_text(text: str) -> str:
    """What every place that shows `text` to a person shows: clean, without markup,
    trimmed."""
    return clean_text(strip_markup(clean_text(str(text)))).strip()
