"""A fold applied by hand, whatever its size: for tests and benchmarks that build a session's
folds directly (the app's folds run through a policy's plan, which applies only folds that shrink
the context). The core calls it is made of are `prepare_fold` and `apply_fold`."""

from __future__ import annotations

from collections.abc import Iterable

from tailrent_tui.core.messages import Folded, FoldSkipped
from tailrent_tui.core.ports import FoldArchive
from tailrent_tui.core.rungs.fold import (
    GuardMode,
    Position,
    apply_fold,
    nothing_reason,
    prepare_fold,
    skip_fold,
    span_messages,
)
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import Summarizer


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
    """Fold these messages into one summary: `summarizer`'s, or the `summary` text given. A pinned
    id in the span is refused (SessionError); an empty span is a FoldSkipped."""
    ids = list(dict.fromkeys(span_ids))
    if not ids:
        return skip_fold(session, nothing_reason(session), trigger)
    if summary is None:
        if summarizer is None:
            raise ValueError("fold_span needs a summarizer or a summary text")
        summary = summarizer.summarize(span_messages(session, ids))
        summarizer_name = summarizer_name or summarizer.name
    record = prepare_fold(
        session,
        ids,
        summary=summary,
        summarizer_name=summarizer_name or "",
        guard=guard,
        position=position,
        header=header,
        trigger=trigger,
    )
    return apply_fold(session, record, archive)
