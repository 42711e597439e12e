"""Reverse search of the input history (ctrl+s, /history or the palette): type to filter, enter takes."""

from __future__ import annotations

from typing import Protocol

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

# Rows shown; the newest matches first.
SHOWN = 200


class HistorySource(Protocol):
    """What the search reads (a PromptHistory)."""

    entries: list[str]

    def search(self, query: str) -> list[str]: ...


def one_line(text: str, width: int = 110) -> str:
    line = " ⏎ ".join(text.splitlines())
    return line if len(line) <= width else line[: width - 1] + "…"


class HistorySearch(ModalScreen[str | None]):
    """Entries containing the query, newest first; dismissed with the chosen text or None."""

    DEFAULT_CSS = """
    HistorySearch { align: center bottom; }
    HistorySearch > Vertical { width: 100%; max-width: 120; height: auto; max-height: 70%;
        background: $surface; border: tall $primary; padding: 0 1; margin: 0 1 2 1; }
    HistorySearch OptionList { height: auto; max-height: 20; border: none; background: $surface; }
    HistorySearch .count { color: $text-muted; height: 1; }
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="history.cancel", tooltip="Back to the input, unchanged"),
        Binding("up", "move(-1)", "Newer", show=False, id="history.up", tooltip="The newer match"),
        Binding("down,ctrl+s", "move(1)", "Older", show=False, id="history.down", tooltip="The older match"),
    ]

    def __init__(self, search: HistorySource, query: str = "") -> None:
        super().__init__()
        self.source = search
        self.query_text = query
        self.matches: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", classes="count")
            yield OptionList()
            yield Input(self.query_text, placeholder="search what you typed before", id="history-query", compact=True)

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "input history: type to search · enter takes · escape cancels"
        self._refresh(self.query_text)
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._refresh(event.value)

    def _refresh(self, query: str) -> None:
        self.matches = self.source.search(query)
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(Option(one_line(t)) for t in self.matches[:SHOWN])
        if self.matches:
            options.highlighted = 0
        more = f" (newest {SHOWN} shown)" if len(self.matches) > SHOWN else ""
        self.query_one(".count", Static).update(f"{len(self.matches):,} of {len(self.source.entries):,} match{more}")

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            options.highlighted = min(max((options.highlighted or 0) + step, 0), options.option_count - 1)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one(OptionList)
        i = options.highlighted
        self.dismiss(self.matches[i] if self.matches and i is not None else None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.matches[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)
