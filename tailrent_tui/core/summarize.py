"""Summarizers: what a fold asks to turn a span into one message.

A summarizer is synchronous here; a model-backed one (models/) runs its
request first and hands the text to the fold (`fold_span(summary=...)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tailrent_tui.core.messages import Message


@runtime_checkable
class Summarizer(Protocol):
    name: str

    def summarize(self, messages: Sequence[Message]) -> str: ...


class LossySummarizer:
    """The article's mock: the first 12 words of each message, nothing else.

    Words are split on single spaces only (newlines stay inside words), as the
    C# `Split(' ', RemoveEmptyEntries)` does. It stands in for a summarizer
    under pressure: it keeps the shape of each message and drops the specifics.
    """

    name = "mock-lossy"

    def __init__(self, words: int = 12) -> None:
        self.words = words

    def summarize(self, messages: Sequence[Message]) -> str:
        lines = []
        for m in messages:
            words, more = first_words(m.content, self.words)
            lines.append(f"- {m.role}: {' '.join(words)}{'...' if more else ''}")
        return "\n".join(lines).rstrip()


def first_words(text: str, n: int) -> tuple[list[str], bool]:
    """The first `n` words split on single spaces, and whether more follow.

    Splits only as far as needed, so a huge message costs no more than a small one.
    """
    limit = n + 1
    while True:
        parts = text.split(" ", limit)
        rest = parts[limit] if len(parts) > limit else ""
        words = [w for w in parts[:limit] if w]
        if len(words) > n or not rest.strip(" "):
            if rest.strip(" "):
                return words[:n], True
            return words[:n], len(words) > n
        limit *= 4
