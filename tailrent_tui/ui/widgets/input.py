"""The input box: Enter submits, up/down walk the history, tab goes to the transcript.

Slash commands and `!cmd` are typed here too; the app interprets them. A
submitted line is not cleared by the box itself: the app clears it once it
has accepted it, so an unknown command stays in the box to be fixed.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from tailrent_tui.ui.events import PromptSubmitted


class PromptInput(Input):
    """A one-line prompt with a history of what was sent."""

    DEFAULT_CSS = """
    PromptInput { margin: 0 1; border: tall $primary 40%; background: $surface; }
    PromptInput:focus { border: tall $primary; }
    """

    BINDINGS = [
        Binding("up", "history(-1)", "Previous input", show=False, id="input.history_previous",
                tooltip="The line sent before this one"),
        Binding("down", "history(1)", "Next input", show=False, id="input.history_next",
                tooltip="The line sent after this one"),
        Binding("tab", "to_transcript", "To messages", show=False, id="input.to_transcript",
                tooltip="Move the focus to the last message"),
    ]

    def __init__(self, history: list[str] | None = None, *, id: str | None = None) -> None:
        super().__init__(placeholder="Ask, or /help, or !command", id=id)
        self.history: list[str] = list(history or [])
        self._cursor = len(self.history)
        self._draft = ""

    def remember(self, text: str) -> None:
        """Add a sent line to the history (no repeats in a row) and reset the walk."""
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._cursor = len(self.history)
        self._draft = ""

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._cursor == len(self.history):
            self._draft = self.value
        self._cursor = min(max(self._cursor + step, 0), len(self.history))
        self.value = self._draft if self._cursor == len(self.history) else self.history[self._cursor]
        self.cursor_position = len(self.value)

    def action_to_transcript(self) -> None:
        transcript = self.screen.query("Transcript MessageView")
        if transcript:
            transcript.last().focus()
        else:
            self.screen.focus_next()

    async def action_submit(self) -> None:
        text = self.value.strip()
        if text:
            self.post_message(PromptSubmitted(text))
