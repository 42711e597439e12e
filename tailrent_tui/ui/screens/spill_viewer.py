"""The spill viewer: a spilled tool result, whole, read-only.

The text comes from the spill store (via the agent); a missing or altered
spill file shows the store's error instead, in the error color.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TextArea

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
    """

    BINDINGS = [Binding("escape,q", "close", "Close", id="spill_viewer.close", tooltip="Back to the transcript")]

    def __init__(self, spill: Spilled, text: str | None, error: str | None = None) -> None:
        super().__init__()
        self.spill = spill
        self.text = text
        self.error = error

    def compose(self) -> ComposeResult:
        with Vertical(id="frame"):
            yield Static(viewer_title(self.spill), id="title", markup=False)
            if self.error is not None:
                yield Static(self.error, id="error", markup=False)
            else:
                yield TextArea(self.text or "", read_only=True, show_line_numbers=True, soft_wrap=False)
            yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)
