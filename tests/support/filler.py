"""Work talk for tests and benchmarks: sentences with nothing in them to keep (no statement, no fact),
from a fixed vocabulary, seeded so that a run repeats."""

from __future__ import annotations

import random

VOCABULARY = [
    "we",
    "looked",
    "at",
    "the",
    "logs",
    "and",
    "talked",
    "it",
    "over",
    "for",
    "a",
    "while",
    "then",
    "moved",
    "on",
    "to",
    "other",
    "things",
    "like",
    "reviewing",
    "some",
    "older",
    "notes",
    "about",
    "flaky",
    "checks",
    "before",
    "lunch",
    "and",
    "after",
    "coffee",
]


def words(seed: int, n: int) -> str:
    """`n` words of the vocabulary, in an order the seed fixes."""
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCABULARY) for _ in range(n))


def prose(i: int, words: int = 60) -> str:
    """Chatter: a short opening, then sentences with no fact in them (about `words` words), none alike."""
    rng = random.Random(i)
    sentences = [" ".join(rng.choice(VOCABULARY) for _ in range(12)) + "." for _ in range(max(1, words // 12))]
    return f"Turn {i} notes. " + " ".join(sentences)
