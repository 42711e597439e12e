"""What the agent reports to the screen, typed: one small dataclass per kind.

The turn worker, the session's listener and the fold's progress put these on
one queue; the session screen's pump applies them in order
(`TurnFeed.apply_update`, `ui/screens/session_turn.py`), so a reply and the
event that finishes it can never cross. Consecutive `ReplyText`s are joined
into one write: the Markdown re-renders once per batch, not per token.

The agent's own progress records (`RequestStarted`, `SummaryStarted`,
`SummaryEnded`) travel on the same queue as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tailrent_tui.agent.events import RequestStarted, SummaryEnded, SummaryStarted

if TYPE_CHECKING:
    from tailrent_tui.agent.events import TurnResult
    from tailrent_tui.core.messages import Event, ToolCall


@dataclass(frozen=True, slots=True)
class SessionChanged:
    """The session applied an event (a message, a pin, a fold...)."""

    event: Event


@dataclass(frozen=True, slots=True)
class ReplyText:
    """A delta of the streamed reply's text."""

    text: str


@dataclass(frozen=True, slots=True)
class ReplyThinking:
    """A delta of the reply's reasoning."""

    text: str


@dataclass(frozen=True, slots=True)
class ReplyToolCall:
    """The reply asks for a tool."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class AgentNotice:
    """Something the user should read (level "info", "warning" or "error")."""

    text: str
    level: str = "warning"


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The turn is over: its result, or None when it failed on a bug (already reported)."""

    result: TurnResult | None


Update = (
    SessionChanged | ReplyText | ReplyThinking | ReplyToolCall | AgentNotice | TurnEnded
    | RequestStarted | SummaryStarted | SummaryEnded
)


def join_text(batch: list[Update]) -> list[Update]:
    """Consecutive reply deltas become one write: the Markdown re-renders once per batch, not per token."""
    out: list[Update] = []
    for item in batch:
        last = out[-1] if out else None
        if isinstance(item, ReplyText) and isinstance(last, ReplyText):
            out[-1] = ReplyText(last.text + item.text)
        else:
            out.append(item)
    return out
