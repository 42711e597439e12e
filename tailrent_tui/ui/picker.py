"""`tailrent --resume` with no id: pick the session to reopen, before the session's app starts.

The newest first, each row its id, title, model, workspace, last activity and size;
typing filters (by any of them), enter opens the highlighted one, escape opens nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from tailrent_tui.models.text import redact
from tailrent_tui.store.sessions import SessionDir, SessionLookupError, list_sessions


@dataclass(frozen=True)
class PickerRow:
    id: str
    title: str
    model: str
    workspace: str
    last_active: float
    messages: int | None

    @property
    def haystack(self) -> str:
        return f"{self.id} {self.title} {self.model} {self.workspace}".lower()

    def label(self, now: float) -> str:
        title = self.title or "(untitled)"
        count = "?" if self.messages is None else f"{self.messages:,}"
        return f"{self.id}  {_ago(now - self.last_active):>8}  {count:>5} msgs  {title[:40]}\n    {self.model} · {self.workspace}"


def picker_rows(data_dir: Path) -> list[PickerRow]:
    """Every listable session, newest first, as the picker shows it."""
    rows = []
    for info in list_sessions(data_dir):
        try:
            meta = SessionDir(info.path).read_meta()
            model, workspace = redact(meta.model_spec or meta.model or "?"), meta.workspace or "?"
        except (SessionLookupError, OSError):
            model, workspace = "?", "?"
        rows.append(PickerRow(info.id, info.title, model, workspace, info.last_active, info.messages))
    return rows


def _ago(seconds: float) -> str:
    if seconds < 3600:
        return f"{max(seconds, 0) / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


class SessionPicker(App[str]):
    """A list of sessions to resume; returns the chosen id (None: escape)."""

    CSS = """
    #filter { margin: 0 1; }
    #sessions { height: 1fr; margin: 0 1; }
    #count { margin: 0 2; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "quit_picker", "Cancel", id="picker.cancel"),
        Binding("enter", "pick", "Open", id="picker.open", priority=True),
        Binding("down", "move(1)", "Next", show=False, priority=True),
        Binding("up", "move(-1)", "Previous", show=False, priority=True),
    ]

    def __init__(self, rows: list[PickerRow], *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.rows = rows
        self.clock = clock
        self.shown: list[PickerRow] = list(rows)

    def compose(self) -> ComposeResult:
        yield Input(placeholder="type to filter by id, title, model or folder · enter opens · escape cancels", id="filter")
        yield Static("", id="count")
        yield OptionList(id="sessions")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "tailrent: resume which session?"
        self._fill("")
        self.query_one(Input).focus()

    def _fill(self, text: str) -> None:
        words = text.lower().split()
        self.shown = [r for r in self.rows if all(w in r.haystack for w in words)]
        now = self.clock()
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(r.label(now), id=r.id) for r in self.shown])
        if self.shown:
            options.highlighted = 0
        self.query_one("#count", Static).update(f"{len(self.shown):,} of {len(self.rows):,} sessions")

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.exit(event.option.id)

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if not self.shown:
            return
        current = options.highlighted if options.highlighted is not None else 0
        options.highlighted = min(max(current + step, 0), len(self.shown) - 1)

    def action_pick(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not self.shown:
            self.bell()
            return
        self.exit(self.shown[options.highlighted].id)

    def action_quit_picker(self) -> None:
        self.exit(None)
