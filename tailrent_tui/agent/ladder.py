"""Rungs 1 and 2 applied to a tool's outcome, before it enters the transcript.

Rung 1 (the cap) already happened inside the tool; here the capped content is
checked against the spill threshold (rung 2): small results enter inline,
big ones go to the spill store and enter as a compact pointer.
"""

from __future__ import annotations

from tailrent_tui.agent.tools.base import ToolOutcome
from tailrent_tui.core.messages import Message
from tailrent_tui.core.rungs.spill import SpillStore, admit_tool_result
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import TokenCounter


def tool_text(tool_name: str, outcome: ToolOutcome) -> str:
    """The text the model reads for an outcome (errors are marked as such)."""
    if outcome.is_error and not outcome.content.startswith("error:"):
        return f"error: {outcome.content}"
    return outcome.content


def admit_tool_output(
    tool_name: str,
    outcome: ToolOutcome,
    *,
    spill_store: SpillStore,
    counter: TokenCounter,
    threshold: int,
) -> str:
    """What the model would receive for this outcome after the ladder, where no session is
    open (`tailrent tool`): rung 2 as a session applies it, in a throwaway session."""
    scratch = Session(counter=counter)
    return admit_tool_result(scratch, tool_name, tool_text(tool_name, outcome), spill_store, threshold=threshold).content


def admit_to_session(
    session: Session,
    tool_name: str,
    outcome: ToolOutcome,
    *,
    spill_store: SpillStore,
    threshold: int,
    tool_call_id: str | None = None,
    preview_tail: bool = False,
) -> Message:
    """Add a tool's outcome to the session through rung 2."""
    m = admit_tool_result(
        session, tool_name, tool_text(tool_name, outcome), spill_store, threshold=threshold, tool_call_id=tool_call_id,
        preview_tail=preview_tail,
    )
    return m
