"""The Spills panel: every spilled tool result (id, tool, tokens, age); Enter opens it."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tailrent_tui.core.messages import Spilled
from tailrent_tui.ui.events import SpillOpenRequested


def age_text(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def spill_row(s: Spilled, now: float) -> Content:
    return Content.from_markup(
        "[$tail-pointer]$id[/] $tool [b]$tok[/] tok · $age",
        id=s.spill_id[:8],
        tool=s.tool[:18],
        tok=f"{s.tokens_before:,}",
        age=age_text(now - s.at),
    )


class SpillsPanel(OptionList):
    """One row per spill, newest last."""

    DEFAULT_CSS = """
    SpillsPanel { height: auto; max-height: 12; border: none; padding: 0; background: transparent; }
    """

    def show(self, spills: list[Spilled], now: float) -> None:
        highlighted = self.highlighted
        self.set_options([Option(spill_row(s, now), id=s.spill_id) for s in spills] or [Option("no spills yet", disabled=True)])
        if highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(SpillOpenRequested(event.option.id))
