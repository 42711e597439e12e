"""Probes: which expected words are visible in the context that would be sent now.

A probe scores each expected string (case-insensitive) as visible or not in the
system prompt, pinned messages, fold summaries, pointer lines and live
messages — what the model would actually read. Spilled files, memory entries
and the fold archive do not count as visible; the report says when a word
survives only there, so the user knows it is recoverable but not in context.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from tailrent_tui.core.messages import Kind, Message
from tailrent_tui.core.session import Session


class Sighting(BaseModel):
    """One place an expected word lives in the context."""

    where: str = Field(description="system | pin | summary | pointer | live")
    message_id: str | None = None
    depth: int = 0
    snippet: str = ""

    def label(self) -> str:
        if self.where == "summary":
            return f"summary of depth {self.depth}"
        if self.where == "live":
            return "live message"
        return self.where


class ProbeItem(BaseModel):
    word: str
    visible: bool
    sightings: list[Sighting] = Field(default_factory=list)
    archive_only: list[str] = Field(default_factory=list, description="where it survives outside the context")


class ProbeReport(BaseModel):
    question: str
    items: list[ProbeItem]

    @property
    def hits(self) -> int:
        return sum(1 for i in self.items if i.visible)

    @property
    def total(self) -> int:
        return len(self.items)


def _where(m: Message) -> str:
    if m.pinned:
        return "pin"
    if m.kind == Kind.fold_summary:
        return "summary"
    if m.kind in (Kind.spill_pointer, Kind.memory_pointer, Kind.delegate_result):
        return "pointer"
    return "live"


def _snippet(text: str, word: str, width: int = 60) -> str:
    i = text.lower().find(word.lower())
    if i < 0:
        return ""
    a, b = max(0, i - width // 2), min(len(text), i + len(word) + width // 2)
    return ("…" if a else "") + " ".join(text[a:b].split()) + ("…" if b < len(text) else "")


def probe(
    session: Session,
    question: str,
    expect: Sequence[str],
    *,
    outside: Mapping[str, str] | Iterable[tuple[str, str]] = (),
) -> ProbeReport:
    """Where each expected word lives now. `outside` is (label, text) pairs
    from the archive, spills and memory: searched only for words the context lacks."""
    if not expect:
        raise ValueError("a probe needs at least one expected word (--expect WORD)")
    outside_pairs = list(outside.items()) if isinstance(outside, Mapping) else list(outside)
    items = []
    for word in expect:
        w = word.lower()
        sightings = []
        if w in session.system.lower():
            sightings.append(Sighting(where="system", snippet=_snippet(session.system, word)))
        for m in session.messages:
            if w in m.content.lower():
                sightings.append(
                    Sighting(where=_where(m), message_id=m.id, depth=m.fold_depth, snippet=_snippet(m.content, word))
                )
        archive_only: list[str] = []
        if not sightings:
            archive_only = [label for label, text in outside_pairs if w in text.lower()]
        items.append(ProbeItem(word=word, visible=bool(sightings), sightings=sightings, archive_only=archive_only))
    return ProbeReport(question=question, items=items)


def format_probe(report: ProbeReport) -> str:
    lines = [f"probe: {report.question}", f"visible: {report.hits}/{report.total}"]
    for item in report.items:
        if item.visible:
            places = ", ".join(sorted({s.label() for s in item.sightings}))
            lines.append(f"  ✓ {item.word!r} — in {places}")
        elif item.archive_only:
            lines.append(f"  ✗ {item.word!r} — not in context; only in {', '.join(item.archive_only[:4])}")
        else:
            lines.append(f"  ✗ {item.word!r} — nowhere in this session")
    return "\n".join(lines)
