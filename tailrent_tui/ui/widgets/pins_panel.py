"""The Pins panel: each pinned message's first line, and what the pins cost per turn."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tailrent_tui.core.messages import Kind, Message
from tailrent_tui.ui.events import MessageFocused


class PinsPanel(Vertical):
    """Pinned messages in transcript order; their tokens are re-sent on every turn."""

    DEFAULT_CSS = """
    PinsPanel { height: auto; }
    PinsPanel > .cost { color: $text-muted; height: auto; }
    PinsPanel.-over-budget > .cost { color: $warning; text-style: bold; }
    PinsPanel > OptionList { height: auto; max-height: 10; border: none; padding: 0; background: transparent; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", classes="cost")
        yield OptionList()

    def on_mount(self) -> None:
        if self._waiting is not None:
            self.show(*self._waiting)

    _waiting: tuple[Sequence[Message], int, bool] | None = None

    def show(self, pins: Sequence[Message], budget: int, auto_pin_stopped: bool = False) -> None:
        """The pins and their cost; at `budget` tokens, a warning: auto-pinning has stopped."""
        if not self.is_mounted or not self.query(".cost"):
            # asked before its children exist (the demo redraws from its first event), or while
            # the app takes them down: shown on mount, if ever
            self._waiting = (pins, budget, auto_pin_stopped)
            return
        total = sum(m.tokens for m in pins)
        over = total > budget or auto_pin_stopped
        self.set_class(over, "-over-budget")
        markup = "[$tail-pinned]$n[/] · $tok tokens re-sent every turn"
        if over:
            markup += "\nat the $budget-token pin budget: auto-pin is off; unpin what no longer matters (u)"
        self.query_one(".cost", Static).update(
            Content.from_markup(
                markup,
                n=f"{len(pins)} pin" + ("" if len(pins) == 1 else "s"),
                tok=f"{total:,}",
                budget=f"{budget:,}",
            )
        )
        rows = [
            Option(
                Content.from_markup("$line [dim]$tok tok[/]", line=_first_line(m), tok=f"{m.tokens:,}"),
                id=m.id,
            )
            for m in pins
        ]
        self.query_one(OptionList).set_options(rows or [Option("nothing pinned", disabled=True)])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(MessageFocused(event.option.id))


def _first_line(m: Message, width: int = 34) -> str:
    line = f"{m.meta.get('source', '')} · project instructions" if m.kind == Kind.instructions else m.first_line
    return line if len(line) <= width else line[: width - 1] + "…"
