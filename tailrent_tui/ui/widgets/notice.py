"""The notice bar under the header: what the user must know now (the mock model, YOLO).

It stays until dismissed (a click, or ctrl+n: the app's `dismiss_notice`), because the
message about how to connect a real model has to be readable, not a toast.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class NoticeBar(Static):
    """A one-or-two-line notice; hidden when empty."""

    DEFAULT_CSS = """
    NoticeBar { height: auto; padding: 0 1; background: $warning 20%; color: $text; display: none; }
    NoticeBar.-shown { display: block; }
    NoticeBar.-error { background: $error 25%; }
    """

    def show(self, text: str | None, level: str = "warning") -> None:
        # the text as written (a `[slots]` group, a path), never read as markup
        self.update(Content.assemble(text, ("  (ctrl+n or a click hides this)", "dim")) if text else "")
        self.set_class(bool(text), "-shown")
        self.set_class(level == "error", "-error")

    def on_click(self) -> None:
        self.show(None)
