"""Chunks are measured in the model's tokens, keep exact offsets, prefer
paragraph ends, and overlap by whole sentences."""

from __future__ import annotations

import pytest

from flowforge.knowledge.chunking import chunk_text
from flowforge.knowledge.embeddings import get_embedder

SPANS = get_embedder().token_spans


def _paragraphs(n: int) -> str:
    return "\n\n".join(
        " ".join(f"Paragraph {p} sentence {s} talks about refunds and parcels." for s in range(6))
        for p in range(n))


def test_chunks_fit_the_size_and_keep_offsets():
    text = _paragraphs(12)
    chunks = chunk_text(text, SPANS, size=60, overlap=15)
    assert len(chunks) > 5
    for chunk in chunks:
        assert text[chunk.start:chunk.end] == chunk.content
        assert get_embedder().count_tokens(chunk.content) <= 60
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[-1].end == len(text)


def test_overlap_repeats_whole_sentences():
    chunks = chunk_text(_paragraphs(6), SPANS, size=60, overlap=15)
    for previous, current in zip(chunks, chunks[1:]):
        assert current.start < previous.end              # overlapping
        assert current.content.startswith("Paragraph")   # at a sentence start
    without = chunk_text(_paragraphs(6), SPANS, size=60, overlap=0)
    assert all(b.start >= a.end for a, b in zip(without, without[1:]))


def test_prefers_paragraph_boundaries():
    first = "First topic sentence one. First topic sentence two. First topic sentence three."
    text = first + "\n\n" + "Second topic starts here. " * 8
    chunks = chunk_text(text, SPANS, size=30, overlap=0)
    # The first paragraph (15 tokens) plus three more sentences would fit; the
    # cut is made at the paragraph end instead.
    assert chunks[0].content == first


def test_a_sentence_longer_than_a_chunk_is_cut_at_tokens():
    text = "word " * 500
    chunks = chunk_text(text.strip(), SPANS, size=100, overlap=0)
    assert len(chunks) == 5
    assert all(c.tokens <= 100 for c in chunks)


def test_empty_and_bad_sizes():
    assert chunk_text("   \n\n  ", SPANS) == []
    with pytest.raises(ValueError, match="too small"):
        chunk_text("x", SPANS, size=2)
