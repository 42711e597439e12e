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
            words = [w for w in m.content.split(" ") if w]
            more = "..." if len(words) > self.words else ""
            lines.append(f"- {m.role}: {' '.join(words[: self.words])}{more}")
        return "\n".join(lines).rstrip()
