"""The Folds panel: the timeline of folds; Enter opens the fold inspector.

Each row: fold number, time, tokens before -> after, depth, and the facts the
fold lost, in the theme's error color when there are any (or "undone" once
`/unfold` put its originals back). A fold whose
summary is being written has a last row of its own, marked pending; a fold
whose summary was written ahead while you read, marked prepared.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tailrent_tui.agent.events import SummaryStarted
from tailrent_tui.core.messages import FoldRecord
from tailrent_tui.ui.events import FoldInspectRequested


def fold_row(f: FoldRecord, undone: bool = False) -> Content:
    lost = len(f.facts_lost)
    row = Content.from_markup(
        "[$tail-summary]#$no[/] $clock $before → $after x$depth ",
        no=f.fold_no,
        clock=time.strftime("%H:%M:%S", time.localtime(f.summary.created)),
        before=f"{f.tokens_before:,}",
        after=f"{f.tokens_after:,}",
        depth=f.depth,
    )
    if undone:
        tail = Content.from_markup("[dim]undone: originals back[/]")
    elif lost:
        tail = Content.from_markup("[b $error]lost $n[/]", n=lost)
    elif f.facts_repaired:
        tail = Content.from_markup("[$success]repaired $n[/]", n=len(f.facts_repaired))
    else:
        tail = Content.from_markup("[dim]lost 0[/]")
    return row + tail


def prepared_row(p: Any) -> Content:
    return Content.from_markup(
        "[b $success]prepared[/] $messages messages, $tokens tok: applies at the trigger",
        messages=f"{p.messages:,}",
        tokens=f"{p.span_tokens:,}",
    )


def pending_row(s: SummaryStarted) -> Content:
    return Content.from_markup(
        "[b $warning]pending[/] $messages messages, $tokens tok", messages=f"{s.messages:,}", tokens=f"{s.tokens:,}"
    )


class FoldsPanel(OptionList):
    """One row per fold, oldest first; then the fold in flight, if any."""

    DEFAULT_CSS = """
    FoldsPanel { height: auto; max-height: 14; border: none; padding: 0; background: transparent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._folds: Sequence[FoldRecord] = ()
        self._undone: set[int] = set()
        self.pending: SummaryStarted | None = None
        #: the next fold's summary, written ahead while you read (agent's PreparedFold)
        self.prepared: Any = None

    def show(self, folds: Sequence[FoldRecord], undone: set[int] | None = None) -> None:
        self._folds = folds
        if undone is not None:
            self._undone = undone
        highlighted = self.highlighted
        options = [Option(fold_row(f, f.fold_no in self._undone), id=str(f.fold_no)) for f in folds]
        if self.pending is not None:
            options.append(Option(pending_row(self.pending), disabled=True))
        elif self.prepared is not None:
            options.append(Option(prepared_row(self.prepared), disabled=True))
        self.set_options(options or [Option("no folds yet", disabled=True)])
        if highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted

    def mark_pending(self, started: SummaryStarted | None) -> None:
        """A fold's summary is being written (or no longer: None)."""
        self.pending = started
        self.show(self._folds)

    def mark_prepared(self, prepared: Any) -> None:
        """The next fold's summary is written ahead (or was used or dropped: None)."""
        self.prepared = prepared
        self.show(self._folds)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(FoldInspectRequested(int(event.option.id)))
