"""The small list above the input that offers completions (slash commands, their arguments, `@paths`).

It never takes the focus: the input keeps it and drives the menu (up/down
move, tab or enter take, escape closes); a click takes an entry too.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tailrent_tui.ui.completion import Completion, Item


class CompletionMenu(OptionList, can_focus=False):
    """Hidden unless the input has something to offer."""

    DEFAULT_CSS = """
    CompletionMenu {
        display: none; height: auto; max-height: 8; margin: 0 1; padding: 0;
        border: none; background: $panel; scrollbar-size-vertical: 1;
    }
    CompletionMenu.-open { display: block; }
    CompletionMenu > .option-list--option-highlighted { background: $primary 40%; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.completion: Completion | None = None
        self.on_pick: Callable[[Item], None] | None = None

    @property
    def is_open(self) -> bool:
        return self.completion is not None

    def show(self, completion: Completion | None) -> None:
        self.completion = completion
        self.clear_options()
        if completion is not None:
            self.add_options(
                Option(Content.assemble((item.text, "bold"), ("  " + item.help, "dim") if item.help else ""))
                for item in completion.items
            )
            self.highlighted = 0
        self.set_class(completion is not None, "-open")

    @property
    def current(self) -> Item | None:
        if self.completion is None or self.highlighted is None:
            return None
        return self.completion.items[self.highlighted]

    def move(self, step: int) -> None:
        if self.completion is None:
            return
        n = len(self.completion.items)
        self.highlighted = ((self.highlighted or 0) + step) % n

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.completion is not None and self.on_pick is not None:
            self.on_pick(self.completion.items[event.option_index])
