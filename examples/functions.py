"""Python functions for examples/scoring.yaml, registered by name.

    flowforge run examples/scoring.yaml --import examples/functions.py -i text="..."
"""

import flowforge


@flowforge.function("word_stats")
def word_stats(text: str) -> dict:
    """Count words and sentences in a text."""
    words = text.split()
    sentences = max(1, sum(text.count(mark) for mark in ".!?"))
    return {"words": len(words), "sentences": sentences,
            "words_per_sentence": round(len(words) / sentences, 1)}
