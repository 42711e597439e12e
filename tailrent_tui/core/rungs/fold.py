"""Rung 5: fold — destructive compaction, last resort.

Keeps: one summary message in the span's place, the span's facts that the
summary carries, and (with guard "repair") every fact the summarizer dropped,
appended verbatim. The originals go to the fold archive before the fold is
applied: a fold is destructive for the context, never for the session.
Loses: the wording, and with guard "report" or "off" whatever facts the
summarizer dropped. Tool output in the span is not guarded (see
`GUARDED_KINDS`): it stays recoverable from the archive and the spills. The policy reaches for it only after truncation and
spilling, when the context is past the fold trigger, and then folds in one big
step down to the fold target, in place, so the cache before the span survives.
Pinned messages never enter the span.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from tailrent_tui.core.messages import Folded, FoldRecord, FoldSkipped, Kind, Message
from tailrent_tui.core.session import Session, SessionError
from tailrent_tui.core.summarize import Summarizer

GuardMode = Literal["repair", "report", "off"]
Position = Literal["in_place", "front"]


class FoldArchive(Protocol):
    def write_fold(self, fold_no: int, originals: Sequence[Message], summary: str, facts_lost: Sequence[str]) -> None:
        """Persist a fold's originals before it is applied; raise OSError to stop the fold."""
        ...


class FoldAborted(RuntimeError):
    """The fold did not happen (its originals could not be archived)."""


def foldable(session: Session) -> list[Message]:
    """Messages a fold may touch: not pinned."""
    return [m for m in session.messages if not m.pinned]


def select_span(session: Session, *, target_tokens: int, keep_recent: int = 2, summary_allowance: int = 0) -> list[str]:
    """The oldest unpinned messages whose removal brings the context to `target_tokens`.

    The last `keep_recent` messages are never selected (the turn in flight).
    `summary_allowance` is the expected size of the summary, added back.
    """
    msgs = session.messages
    limit = max(0, len(msgs) - keep_recent)
    excess = session.context_tokens + summary_allowance - target_tokens
    span: list[str] = []
    freed = 0
    for m in msgs[:limit]:
        if freed >= excess:
            break
        if m.pinned:
            continue
        span.append(m.id)
        freed += m.tokens
    return span


def oldest_unpinned(session: Session, count: int) -> list[str]:
    """The first `count` unpinned messages (the article's fold batch)."""
    out: list[str] = []
    for m in session.messages:
        if len(out) >= count:
            break
        if not m.pinned:
            out.append(m.id)
    return out


#: Kinds whose facts the guard carries through a fold. Tool output and spill
#: pointers are left out on purpose: their content is recoverable (the spill
#: file, the fold archive via search_history, or running the tool again), and
#: carrying every path and count of every grep into each summary would make
#: summaries as big as what they replace.
GUARDED_KINDS = (Kind.chat, Kind.fold_summary, Kind.delegate_result, Kind.memory_pointer)


def _span_text(span: Sequence[Message], folds: Sequence[FoldRecord] = ()) -> str:
    """The span's text the fact guard reads: conversation, summaries, pointers to memory.

    A summary in the span contributes the facts it carries (its fold's facts
    that survived it), not its whole text: its text also summarizes tool
    output, whose ids and counts are not facts to carry (see GUARDED_KINDS).
    """
    lineage = {f.summary.id: f for f in folds}
    parts = []
    for m in span:
        if m.kind == Kind.fold_summary and m.id in lineage:
            record = lineage[m.id]
            lost = set(record.facts_lost)
            parts.append("; ".join(f for f in record.facts if f not in lost))
        elif m.kind in GUARDED_KINDS:
            parts.append(m.content)
    return "\n".join(parts)


def fold_span(
    session: Session,
    span_ids: Iterable[str],
    *,
    summarizer: Summarizer | None = None,
    summary: str | None = None,
    summarizer_name: str | None = None,
    guard: GuardMode = "repair",
    position: Position = "in_place",
    header: str | None = None,
    archive: FoldArchive | None = None,
    trigger: str = "manual",
) -> Folded | FoldSkipped:
    """Fold the given messages into one summary and apply it as a Folded event.

    Either `summarizer` (called here) or a precomputed `summary` text (from a
    model) must be given. `header` is a format string with `{n}` (messages) and
    `{depth}`; by default "[fold #{no} · {n} messages · depth {depth}]".
    Pinned ids in the span are refused: a pin is never folded.
    """
    ids = list(dict.fromkeys(span_ids))
    if not ids:
        ev = FoldSkipped(reason=_nothing_reason(session), trigger=trigger, at=session.clock())
        return session.emit(ev)  # type: ignore[return-value]
    span = [session.get(i) for i in ids]
    pinned = [m.id for m in span if m.pinned]
    if pinned:
        raise SessionError(f"cannot fold pinned messages {pinned}: unpin them first")
    order = {m.id: i for i, m in enumerate(session.messages)}
    span.sort(key=lambda m: order[m.id])
    if summary is None:
        if summarizer is None:
            raise ValueError("fold_span needs a summarizer or a summary text")
        summary = summarizer.summarize(span)
        summarizer_name = summarizer_name or summarizer.name
    depth = 1 + max(m.fold_depth for m in span)
    fold_no = len(session.folds) + 1

    facts: list[str] = []
    dropped: list[str] = []
    lost: list[str] = []
    repaired: list[str] = []
    body = summary
    if guard != "off":
        from tailrent_tui.core import guard as fact_guard

        span_facts = fact_guard.extract_facts(_span_text(span, session.folds), session.watch)
        facts = [f.text for f in span_facts]
        missing = fact_guard.lost_facts(span_facts, summary)
        dropped = [f.text for f in missing]
        if guard == "repair" and missing:
            body = fact_guard.repair_summary(summary, missing)
            repaired = dropped
            lost = [f.text for f in fact_guard.lost_facts(span_facts, body)]
        else:
            lost = dropped

    if header is None:
        header = "[fold #{no} · {n} messages · depth {depth}]"
    content = header.format(no=fold_no, n=len(span), depth=depth) + "\n" + body
    tokens_before = sum(m.tokens for m in span)
    summary_msg = session.make_message("system", content, kind=Kind.fold_summary)
    summary_msg.fold_depth = depth
    summary_msg.folded_ids = [m.id for m in span]
    repair_tokens = summary_msg.tokens - session.count(header.format(no=fold_no, n=len(span), depth=depth) + "\n" + summary) if repaired else 0

    if archive is not None:
        try:
            archive.write_fold(fold_no, span, content, lost or dropped)
        except OSError as exc:
            raise FoldAborted(f"fold #{fold_no} not applied: its originals could not be archived ({exc})") from exc

    if position == "front":
        position_index = 0
    else:
        # the summary takes the place of the span's first message, so the
        # prefix before it (and its cache) is left untouched
        in_span = set(ids)
        position_index = sum(1 for m in session.messages[: order[span[0].id]] if m.id not in in_span)
    context_before = session.context_tokens
    record = FoldRecord(
        fold_no=fold_no,
        span_ids=[m.id for m in span],
        position=position_index,
        summary=summary_msg,
        tokens_before=tokens_before,
        tokens_after=summary_msg.tokens,
        context_before=context_before,
        context_after=context_before - tokens_before + summary_msg.tokens,
        depth=depth,
        facts=facts,
        facts_dropped=dropped,
        facts_lost=lost,
        facts_repaired=repaired,
        repair_tokens=max(0, repair_tokens),
        trigger=trigger,
        summarizer=summarizer_name or "",
        guard=guard,
    )
    return session.emit(Folded(fold=record, at=session.clock()))  # type: ignore[return-value]


def _nothing_reason(session: Session) -> str:
    if not session.messages:
        return "nothing to fold: the transcript is empty"
    if all(m.pinned for m in session.messages):
        return "nothing to fold: every message is pinned"
    return "nothing to fold: the context is already under the fold target"


def fold_to_target(
    session: Session,
    *,
    target_tokens: int,
    summarizer: Summarizer,
    guard: GuardMode = "repair",
    keep_recent: int = 2,
    archive: FoldArchive | None = None,
    trigger: str = "policy",
) -> Folded | FoldSkipped:
    """One big fold: the oldest unpinned span down to the target, in place."""
    span = select_span(session, target_tokens=target_tokens, keep_recent=keep_recent)
    return fold_span(session, span, summarizer=summarizer, guard=guard, archive=archive, trigger=trigger)


class MemoryFoldArchive:
    """Fold originals kept in memory: for tests, benchmarks and sub-sessions."""

    def __init__(self) -> None:
        self.folds: dict[int, tuple[list[Message], str, list[str]]] = {}

    def write_fold(self, fold_no: int, originals: Sequence[Message], summary: str, facts_lost: Sequence[str]) -> None:
        self.folds[fold_no] = ([m.model_copy() for m in originals], summary, list(facts_lost))

    def read_originals(self, fold_no: int) -> list[Message]:
        try:
            return list(self.folds[fold_no][0])
        except KeyError:
            raise KeyError(f"fold #{fold_no} is not in the archive") from None

    def fold_numbers(self) -> list[int]:
        return sorted(self.folds)
