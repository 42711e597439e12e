"""What the agent reports to its caller, and asks of it: typed, one record per kind.

A turn reports through `TurnCallbacks` (text, thinking, tool calls and results,
notices, the start of each request) and asks `approve` before a tool that needs
the user's word; folds report their summary's progress to `Agent.on_summary`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tailrent_tui.core.messages import Message, ToolCall
from tailrent_tui.models.base import Usage
from tailrent_tui.models.errors import ModelError

#: how the session note of a turn's model error begins: the turn's end shows that error once, with
#: what to do, so the screen does not show the note besides (one failure, one message)
MODEL_ERROR_NOTE = "model error: "


@dataclass(frozen=True)
class Denied:
    """A denial with the user's reason, which the model receives with the tool error."""

    reason: str


Approval = Literal["once", "prefix", "deny"] | Denied


@dataclass
class ApprovalRequest:
    """A tool call that needs the user's word before it runs."""

    tool: str
    arguments: dict[str, Any]
    command_prefix: str | None = None
    """what "allow for the session" would cover; None when only "allow once" is offered"""
    diff: str | None = None
    allows: str | None = None
    """one line for the dialog: exactly what a session approval allows, or why none is offered"""


def noop(*_: Any) -> None:
    return None


async def _deny(_: ApprovalRequest) -> Approval:
    return "deny"


class RequestStarted(BaseModel):
    """A request to the model is on its way: what the server reads before its first token.

    On a CPU the reading takes most of a long turn (52 s for 6,610 tokens on
    2 cores), so the screen says what is being read and how long it should take.
    """

    model_config = ConfigDict(frozen=True)
    context_tokens: int = Field(description="the whole context, as counted here")
    to_read: int | None = Field(
        default=None, description="tokens the server evaluates: the tail past its cached prefix (None without a rent model)"
    )
    read_seconds: float | None = Field(
        default=None, description="`to_read` at the prompt rate the server measured on earlier requests (None before any)"
    )


class SummaryStarted(BaseModel):
    """A fold asked for its span's summary: a model may take minutes to write it."""

    model_config = ConfigDict(frozen=True)
    messages: int = Field(description="messages in the span being folded")
    tokens: int = Field(description="tokens of that span")
    by: str = Field(description="the summarizer asked")


class SummaryEnded(BaseModel):
    """The summary that SummaryStarted announced is in, failed, or was cancelled (no fold is applied then)."""

    model_config = ConfigDict(frozen=True)
    outcome: Literal["written", "failed", "cancelled"]
    error: str | None = None


SummaryProgress = SummaryStarted | SummaryEnded


@dataclass
class TurnCallbacks:
    on_text: Callable[[str], None] = noop
    on_thinking: Callable[[str], None] = noop
    on_tool_call: Callable[[ToolCall], None] = noop
    on_tool_result: Callable[[Message], None] = noop
    on_notice: Callable[[str, str], None] = noop
    on_reply_start: Callable[[RequestStarted], None] = noop
    approve: Callable[[ApprovalRequest], Awaitable[Approval]] = _deny


@dataclass
class TurnResult:
    reply: Message | None = None
    cancelled: bool = False
    error: ModelError | None = None
    usage: list[Usage] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
