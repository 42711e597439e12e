"""What the agent reports to the session screen: Textual messages, one class per kind.

The turn runner (`ui/screens/turn_runner.py`), the session's listener and the
fold's progress post these to the screen, whose handlers (`@on`) put them on
the widgets. Textual handles one node's messages in the order they were posted,
so a reply and the event that finishes it can never cross. A reply's text
arrives as one `ReplyText` per run of deltas: while one waits to be handled,
the next deltas join it (`ReplyText.parts`), so the Markdown re-renders once
per batch, not per token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from tailrent_tui.agent.events import RequestStarted, SummaryEnded, SummaryStarted, TurnResult
    from tailrent_tui.core.messages import Event, ToolCall
    from tailrent_tui.ui.chips import Outgoing


class AgentUpdate(Message, bubble=False):
    """Something the agent reported; handled by the session screen only."""


class SessionChanged(AgentUpdate):
    """The session applied an event (a message, a pin, a fold...)."""

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event


class ReplyText(AgentUpdate):
    """Deltas of the streamed reply's text: the runner appends to `parts` until the screen handles it."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.parts = [text]
        #: the screen has read it: later deltas go in a new message
        self.taken = False

    def take(self) -> str:
        """The text so far, for the screen; the deltas after this go in the next `ReplyText`."""
        self.taken = True
        return "".join(self.parts)


class ReplyThinking(AgentUpdate):
    """A delta of the reply's reasoning."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class ReplyToolCall(AgentUpdate):
    """The reply asks for a tool."""

    def __init__(self, call: ToolCall) -> None:
        super().__init__()
        self.call = call


class ReplyStarted(AgentUpdate):
    """A request to the model went out: a reply begins."""

    def __init__(self, started: RequestStarted) -> None:
        super().__init__()
        self.started = started


class AgentNotice(AgentUpdate):
    """Something the user should read (level "info", "warning" or "error")."""

    def __init__(self, text: str, level: str = "warning") -> None:
        super().__init__()
        self.text = text
        self.level = level


class TurnEnded(AgentUpdate):
    """The turn is over: its result, or None when it failed on a bug (already reported);
    `unsent`, the message it stopped before taking in (an `Outgoing`), to give back to the input."""

    def __init__(self, result: TurnResult | None, unsent: Outgoing | None = None) -> None:
        super().__init__()
        self.result = result
        self.unsent = unsent


class FoldProgress(AgentUpdate):
    """A fold's summary is asked for (`SummaryStarted`) or is in (`SummaryEnded`)."""

    def __init__(self, progress: SummaryStarted | SummaryEnded) -> None:
        super().__init__()
        self.progress = progress


class FoldPrepared(AgentUpdate):
    """A fold's summary was written ahead, or the one written ahead was used or dropped (None)."""

    def __init__(self, prepared: Any) -> None:
        super().__init__()
        self.prepared = prepared
