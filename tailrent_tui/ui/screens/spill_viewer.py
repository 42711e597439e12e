"""The spill viewer: a spilled tool result, whole, read-only.

The text comes from the spill store (via the agent); a missing or altered
spill file shows the store's error instead, in the error color. `/` searches
(case-insensitive; enter finds, `n`/`N` the next and the previous), `end` and
`home` go to the last and the first line.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static, TextArea
from textual.widgets.text_area import Selection

from tailrent_tui.core.messages import Spilled


def viewer_title(s: Spilled) -> str:
    parts = [f"spill {s.spill_id}", s.tool, f"{s.tokens_before:,} tokens", s.location]
    return " · ".join(p for p in parts if p)  # a spill made in memory (the demo) has no location


class SpillViewer(ModalScreen[None]):
    """Shows one spill's content."""

    DEFAULT_CSS = """
    SpillViewer { align: center middle; }
    SpillViewer > #frame { width: 96%; height: 92%; background: $surface; border: thick $tail-pointer; }
    SpillViewer #title { background: $panel; text-style: bold; padding: 0 1; height: 1; }
    SpillViewer #error { color: $error; padding: 1 2; height: auto; }
    SpillViewer TextArea { height: 1fr; border: none; }
    SpillViewer #search { display: none; height: 3; }
    SpillViewer #search.-shown { display: block; }
    SpillViewer #found { height: 1; padding: 0 1; color: $text-muted; }
    """

    BINDINGS = [
        Binding("escape,q", "close", "Close", id="spill_viewer.close", tooltip="Back to the transcript"),
        Binding(
            "slash",
            "search",
            "Search",
            id="spill_viewer.search",
            priority=True,
            tooltip="Find text in the spill (case-insensitive)",
        ),
        Binding("n", "find(1)", "Next", id="spill_viewer.next", priority=True, tooltip="The next match"),
        Binding("N", "find(-1)", "Previous", id="spill_viewer.previous", priority=True, tooltip="The previous match"),
        Binding("end", "edge(1)", "End", id="spill_viewer.end", priority=True, tooltip="The last line"),
        Binding("home", "edge(-1)", "Start", id="spill_viewer.start", priority=True, tooltip="The first line"),
    ]

    def __init__(self, spill: Spilled, text: str | None, error: str | None = None) -> None:
        super().__init__()
        self.spill = spill
        self.text = text
        self.error = error
        self.query_text = ""

    def compose(self) -> ComposeResult:
        with Vertical(id="frame"):
            yield Static(viewer_title(self.spill), id="title", markup=False)
            if self.error is not None:
                yield Static(self.error, id="error", markup=False)
            else:
                yield TextArea(self.text or "", read_only=True, show_line_numbers=True, soft_wrap=False)
                yield Input(placeholder="find in the spill · enter finds · escape back", id="search")
                yield Static("", id="found", markup=False)
            yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("search", "find", "edge"):
            if self.error is not None:
                return False
            # typing in the search box: the keys are its own
            return not isinstance(self.focused, Input)
        return True

    def action_close(self) -> None:
        box = self.query(Input)
        if box and box.first().has_focus:
            box.first().remove_class("-shown")
            self.query_one(TextArea).focus()
            return
        self.dismiss(None)

    def action_search(self) -> None:
        box = self.query_one(Input)
        box.add_class("-shown")
        box.value = self.query_text
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_text = event.value
        event.input.remove_class("-shown")
        self.query_one(TextArea).focus()
        self.action_find(1, from_cursor=True)

    def action_find(self, step: int, from_cursor: bool = False) -> None:
        """Select the next (step 1) or previous (-1) match of the query, wrapping round."""
        found = self.query_one("#found", Static)
        if not self.query_text:
            found.update("/ to search")
            return
        area = self.query_one(TextArea)
        text, needle = area.text.lower(), self.query_text.lower()
        cursor = _offset(area.text, area.selection.start if step < 0 else area.selection.end)
        if from_cursor:
            cursor = _offset(area.text, area.selection.start)
        if step > 0:
            at = text.find(needle, cursor)
            wrapped = at < 0
            at = text.find(needle) if wrapped else at
        else:
            at = text.rfind(needle, 0, max(0, cursor))
            wrapped = at < 0
            at = text.rfind(needle) if wrapped else at
        if at < 0:
            found.update(f"no match for {self.query_text!r}")
            return
        count = text.count(needle)
        start, end = _location(area.text, at), _location(area.text, at + len(needle))
        area.selection = Selection(start, end)
        area.scroll_cursor_visible(center=True)
        nth = text.count(needle, 0, at) + 1
        found.update(f"match {nth} of {count}" + (" (wrapped)" if wrapped else "") + " · n next · N previous")

    def action_edge(self, step: int) -> None:
        area = self.query_one(TextArea)
        if step > 0:
            area.move_cursor(area.document.end)
            area.scroll_end(animate=False)
        else:
            area.move_cursor((0, 0))
            area.scroll_home(animate=False)


def _offset(text: str, location: tuple[int, int]) -> int:
    """A (row, column) of the text as a character offset."""
    row, column = location
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:row]) + column


def _location(text: str, offset: int) -> tuple[int, int]:
    """A character offset of the text as (row, column)."""
    before = text[:offset]
    row = before.count("\n")
    return row, offset - (before.rfind("\n") + 1)
