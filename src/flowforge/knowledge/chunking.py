"""Split a document into chunks measured in the embedding model's tokens.

Why tokens: the model truncates its input (MiniLM at 256 tokens), so a chunk
measured in characters either wastes the window or silently loses its end.
Chunks are packed from whole sentences, cut preferably at a paragraph
boundary, and overlap the previous chunk by up to `overlap` tokens of whole
sentences, so a fact that straddles a cut is still found.  A sentence longer
than a chunk is cut at token boundaries.  Each chunk keeps its character
offsets in the source text, so a result can be traced back exactly.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable

__all__ = ["Chunk", "chunk_text", "DEFAULT_CHUNK_TOKENS", "DEFAULT_OVERLAP_TOKENS"]

DEFAULT_CHUNK_TOKENS = 200
DEFAULT_OVERLAP_TOKENS = 30

# A sentence ends at . ! ? (plus closing quotes/brackets) followed by space, or at a line end.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n")
_PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int
    content: str
    start: int          # character offsets in the document text: text[start:end] == content
    end: int
    tokens: int


@dataclass(slots=True)
class _Unit:
    start: int
    end: int
    tokens: int
    paragraph_start: bool


def _units(text: str, count: Callable[[int, int], int], spans: list[tuple[int, int]],
           size: int) -> list[_Unit]:
    """Sentences (with their paragraph starts marked); over-long ones split."""
    units: list[_Unit] = []
    for para in _paragraph_spans(text):
        first = True
        for s_start, s_end in _sentence_spans(text, *para):
            tokens = count(s_start, s_end)
            if tokens <= size:
                units.append(_Unit(s_start, s_end, tokens, first))
            else:
                inside = [sp for sp in spans if sp[0] >= s_start and sp[1] <= s_end]
                for i in range(0, len(inside), size):
                    piece = inside[i:i + size]
                    start = s_start if i == 0 else piece[0][0]
                    end = s_end if i + size >= len(inside) else inside[i + size][0]
                    units.append(_Unit(start, end, len(piece), first and i == 0))
            first = False
    return units


def _paragraph_spans(text: str):
    position = 0
    for match in _PARAGRAPH.finditer(text):
        yield position, match.start()
        position = match.end()
    yield position, len(text)


def _sentence_spans(text: str, start: int, end: int):
    position = start
    for match in _SENTENCE_END.finditer(text, start, end):
        yield from _trimmed(text, position, match.start())
        position = match.end()
    yield from _trimmed(text, position, end)


def _trimmed(text: str, start: int, end: int):
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        yield start, end


def chunk_text(text: str, token_spans: Callable[[str], list[tuple[int, int]]],
               size: int = DEFAULT_CHUNK_TOKENS,
               overlap: int = DEFAULT_OVERLAP_TOKENS) -> list[Chunk]:
    """Chunks of at most `size` tokens (as `token_spans` counts them), with
    up to `overlap` tokens of whole sentences repeated from the previous chunk."""
    if size < 8:
        raise ValueError(f"chunk size {size} is too small: use at least 8 tokens")
    overlap = max(0, min(overlap, size // 2))
    spans = token_spans(text)
    starts = [s for s, _ in spans]

    def count(a: int, b: int) -> int:
        return bisect_left(starts, b) - bisect_left(starts, a)

    units = _units(text, count, spans, size)
    chunks: list[Chunk] = []
    first = 0
    while first < len(units):
        total, last = 0, first
        while last < len(units) and total + units[last].tokens <= size:
            total += units[last].tokens
            last += 1
        last = max(last, first + 1)
        if last < len(units):
            # Prefer to end at a paragraph boundary if that keeps at least half the chunk.
            for cut in range(last - 1, first, -1):
                if units[cut].paragraph_start:
                    if sum(u.tokens for u in units[first:cut]) >= size // 2:
                        last = cut
                    break
        start, end = units[first].start, units[last - 1].end
        chunks.append(Chunk(len(chunks), text[start:end], start, end,
                            sum(u.tokens for u in units[first:last])))
        if last >= len(units):
            break
        # Next chunk starts with the trailing sentences that fit in `overlap`.
        nxt, carried = last, 0
        while nxt - 1 > first and carried + units[nxt - 1].tokens <= overlap:
            nxt -= 1
            carried += units[nxt].tokens
        first = nxt
    return chunks
