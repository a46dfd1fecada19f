"""`flowforge.safe_text.shown_text`: what every place that shows text to a
person shows (chat answers, formatted responses, session titles, questions)."""

from __future__ import annotations

import pytest

from flowforge.safe_text import shown_text

CASES = {
    "img onerror": ("See <img src=x onerror=alert(1)> the policy", "See  the policy"),
    "img without spaces": ("<img/src=x onerror=alert(1)>Refunds", "Refunds"),
    "script element": ("<script>alert(1)</script>Warranty", "Warranty"),
    "escaped script": ("&lt;script&gt;alert(1)&lt;/script&gt;ok", "ok"),
    "double escaped": ("&amp;lt;script&amp;gt;alert(1)&amp;lt;/script&amp;gt;ok", "ok"),
    "javascript href": ('<a href="javascript:alert(1)">the form</a>', "the form"),
    "markdown javascript link": ("[the form](javascript:alert(1))", "the form"),
    "spaced scheme": ("[the form]( java\tscript:alert(1))", "the form"),
    "bare javascript": ("open javascript:alert(document.cookie) now", "open  now"),
    "data url": ("data:text/html,<script>alert(1)</script>", ""),
    "controls and bidi": ("Hi\x00 there \u202eevil\u200b", "Hi there evil"),
    "comparison kept": ("a < b & c > d", "a < b & c > d"),
    "url kept": ("see https://example.com/a?b=1&c=2", "see https://example.com/a?b=1&c=2"),
    "autolink kept": ("mail <help@example.com> or <https://example.com>",
                      "mail help@example.com or https://example.com"),
    "markdown link kept": ("[site](https://ok.example)", "[site](https://ok.example)"),
    "prose with colon kept": ("Learn javascript: the data: 5 rows", "Learn javascript: the data: 5 rows"),
    "lines kept": ("one\n\n- two\n- three", "one\n\n- two\n- three"),
}


@pytest.mark.parametrize("raw,shown", CASES.values(), ids=list(CASES))
def test_shown_text(raw, shown):
    assert shown_text(raw) == shown
