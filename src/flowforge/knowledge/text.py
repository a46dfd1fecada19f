"""Small text helpers shared by search and the keyword index: query terms
for full-text search, stop words, and the tokens that encode tags.

Why tags become tokens: a tag filter must act *inside* the search, not on
its results (a post-filter returns fewer than `top_k` hits when the nearest
chunks belong elsewhere).  Encoding `category=policies` as one opaque token
lets the full-text index intersect the filter with the query terms itself,
on SQLite (FTS5) and PostgreSQL alike.
"""

from __future__ import annotations

import hashlib
import re
from typing import Mapping

__all__ = ["STOP_WORDS", "query_terms", "tag_token", "base_token", "tag_pairs"]

STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't
doing don't down during each few for from further had hadn't has hasn't have haven't having he
he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if
in into is isn't it it's its itself let's me more most mustn't my myself no nor not of off on
once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up
very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
which while who who's whom why why's will with won't would wouldn't you you'd you'll you're
you've your yours yourself yourselves get got can could may might also just
""".split())

_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(text: str, limit: int = 32) -> list[str]:
    """Distinct lower-case words of a query, stop words removed (all of them
    kept if the query is nothing but stop words)."""
    words = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in words if w not in STOP_WORDS] or words
    return list(dict.fromkeys(kept))[:limit]


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def tag_token(key: str, value: str) -> str:
    """`category=policies` -> an opaque word (letters and digits only)."""
    return f"tg{_digest(f'{key.lower()}={value.lower()}')}"


def base_token(name: str) -> str:
    """The word that marks every chunk of one knowledge base."""
    return f"kb{_digest(name)}"


def tag_pairs(tags: Mapping[str, list[str]]) -> list[str]:
    """`{category: [a, b]}` -> `["category=a", "category=b"]` (PostgreSQL's text[])."""
    return [f"{k}={v}" for k, values in sorted(tags.items()) for v in values]
