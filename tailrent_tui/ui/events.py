"""Messages the widgets post up to the session screen: what the user asked for.

Widgets never call the agent; they say what happened and the screen acts
(attributes down, messages up), so tests can record these with `message_hook`.
"""

from __future__ import annotations

from textual.message import Message


class SpillOpenRequested(Message):
    """Show a spilled tool result in the spill viewer."""

    def __init__(self, spill_id: str) -> None:
        super().__init__()
        self.spill_id = spill_id


class FoldInspectRequested(Message):
    """Show a fold's originals and summary side by side."""

    def __init__(self, fold_no: int) -> None:
        super().__init__()
        self.fold_no = fold_no


class MessageFocused(Message):
    """A transcript message got the focus: it is now the target of p, u, s, f and i."""

    def __init__(self, message_id: str) -> None:
        super().__init__()
        self.message_id = message_id


class PaletteAction(Message):
    """The command palette ran an action (`pin`, `fold`...): the screen runs its `action_<name>`."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action = action


class PaletteSlash(Message):
    """The command palette chose a slash command (its name in the action table)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class PromptSubmitted(Message):
    """The user pressed Enter in the input box; `pastes` maps each paste chip left in the text to what it holds."""

    def __init__(self, text: str, pastes: dict[str, str] | None = None, typed: str | None = None) -> None:
        super().__init__()
        self.text = text
        self.pastes = dict(pastes or {})
        #: the box's text as it was when enter was pressed: what is cleared once the app accepts it
        self.typed = text if typed is None else typed
