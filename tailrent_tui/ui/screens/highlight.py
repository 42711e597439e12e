"""Marking facts inside a text, case-insensitively, with a theme style."""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content


def mark_facts(text: str, facts: Iterable[tuple[str, str]]) -> Content:
    """`text` with every occurrence of each fact styled; `facts` is (fact, style) pairs."""
    content = Content(text)
    lower = text.lower()
    for fact, style in facts:
        needle = fact.lower()
        if not needle:
            continue
        start = lower.find(needle)
        while start != -1:
            content = content.stylize(style, start, start + len(needle))
            start = lower.find(needle, start + len(needle))
    return content
