"""The turn runner: what runs on the agent, one job at a time, and how its reports reach the screen.

`SessionScreen` composes one. A turn runs in a worker (`start_turn`); so do a
fold by hand (`start_fold`) and a `!cmd` (`start_shell`), and escape cancels
whichever runs (`cancel`). The agent reports through the turn's callbacks:
the runner posts each report to the screen as a Textual message
(`ui/messages.py`), in order. A tool the agent wants to run is put to the user
in `approve` (the agent awaits the answer). While the agent is busy, what the
user sends waits here (`waiting`), to be sent as one message once it is free,
or given back after a cancel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from textual.screen import Screen
from textual.worker import Worker

from tailrent_tui.agent.events import Approval, ApprovalRequest, RequestStarted, TurnCallbacks, TurnResult
from tailrent_tui.core.messages import ToolCall
from tailrent_tui.ui.messages import (
    AgentNotice,
    AgentUpdate,
    ReplyStarted,
    ReplyText,
    ReplyThinking,
    ReplyToolCall,
    TurnEnded,
)
from tailrent_tui.ui.protocol import SessionAgent
from tailrent_tui.ui.screens.approval import ApprovalScreen


@dataclass
class Outgoing:
    """A message on its way to the agent, with what goes beside it (paste chips, @files)."""

    text: str
    pastes: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def join(self, other: Outgoing) -> Outgoing:
        files = self.files + [f for f in other.files if f not in self.files]
        return Outgoing(f"{self.text}\n\n{other.text}", {**self.pastes, **other.pastes}, files)


class TurnRunner:
    """The worker of the turn (or fold by hand, or `!cmd`), the messages waiting for it, approvals, cancel."""

    def __init__(self, host: Screen[Any], agent: SessionAgent, *, yolo: bool) -> None:
        #: the screen the reports are posted to and the workers run on
        self._host = host
        self._agent = agent
        self._yolo = yolo
        self._turn: Worker[None] | None = None
        self._fold: Worker[None] | None = None
        #: a `!cmd` running: escape cancels it (its process group is killed)
        self._shell: Worker[None] | None = None
        #: what the user sent while the agent was busy, sent as one message once it is free
        self.waiting: list[Outgoing] = []
        #: the reply text posted and not handled yet: the next deltas join it
        self._text: ReplyText | None = None

    # -- reports to the screen -------------------------------------------------------

    def post(self, update: AgentUpdate) -> None:
        """Post a report to the screen; a reply's text after it starts a new message (order kept)."""
        self._text = None
        self._host.post_message(update)

    def _on_text(self, delta: str) -> None:
        pending = self._text
        if pending is not None and not pending.taken:
            pending.parts.append(delta)
            return
        self._text = ReplyText(delta)
        self._host.post_message(self._text)

    def _on_thinking(self, delta: str) -> None:
        self.post(ReplyThinking(delta))

    def _on_tool_call(self, call: ToolCall) -> None:
        self.post(ReplyToolCall(call))

    def _on_notice(self, text: str, level: str = "warning") -> None:
        self.post(AgentNotice(text, level))

    def _on_reply_start(self, started: RequestStarted) -> None:
        self.post(ReplyStarted(started))

    def callbacks(self) -> TurnCallbacks:
        return TurnCallbacks(
            on_text=self._on_text,
            on_thinking=self._on_thinking,
            on_tool_call=self._on_tool_call,
            on_notice=self._on_notice,
            on_reply_start=self._on_reply_start,
            approve=self.approve,
        )

    # -- the jobs --------------------------------------------------------------------

    @property
    def folding(self) -> bool:
        """A fold by hand is running."""
        return self._fold is not None

    @property
    def shell_running(self) -> bool:
        return self._shell is not None and not self._shell.is_finished

    def start_turn(self, out: Outgoing | None) -> None:
        """Run one turn of the agent in a worker; its end is posted as `TurnEnded`."""
        self._turn = self._host.run_worker(self._run_turn(out), group="turn", name="turn", exit_on_error=False)

    async def _run_turn(self, out: Outgoing | None) -> None:
        try:
            if out is not None:
                # what goes beside the message enters first, through the ladder as a tool's output does
                for label, body in out.pastes.items():
                    await self._agent.tools.attach_paste(label, body)
                for path in out.files:
                    await self._agent.tools.attach_file(path)
            result = await self._agent.turn(out.text if out is not None else None, self.callbacks())
        except asyncio.CancelledError:
            self.post(TurnEnded(TurnResult(cancelled=True)))
            raise
        except Exception as exc:  # a bug in a tool or the loop must not take the app down
            self.post(TurnEnded(None))
            self._host.notify(f"the turn failed: {exc}", severity="error")
            return
        self.post(TurnEnded(result))

    def start_fold(self, job: Coroutine[Any, Any, None], then: Callable[[], Awaitable[None]]) -> None:
        """Run a fold by hand in a worker; `then` runs once it is over and the agent is free."""
        self._fold = self._host.run_worker(self._run_fold(job, then), group="fold", name="fold", exit_on_error=False)

    async def _run_fold(self, job: Coroutine[Any, Any, None], then: Callable[[], Awaitable[None]]) -> None:
        try:
            await job
        finally:
            self._fold = None
        await then()

    def start_shell(self, job: Coroutine[Any, Any, None]) -> None:
        self._shell = self._host.run_worker(job, group="shell", exit_on_error=False)

    def current(self, turn_running: bool) -> Worker[None] | None:
        """What escape cancels: the turn while one runs, else a fold by hand or a `!cmd`."""
        return self._turn if turn_running else (self._fold or self._shell)

    def cancel(self, turn_running: bool) -> bool | None:
        """Cancel what runs: True when cancelled, False when a cancel is landing already, None when nothing runs."""
        worker = self.current(turn_running)
        if worker is None or worker.is_finished:
            return None
        if worker.is_cancelled:
            return False  # escape again while the first one lands: a second cancel would cut its cleanup short
        worker.cancel()
        return True

    # -- the approval bridge ------------------------------------------------------------

    async def approve(self, request: ApprovalRequest) -> Approval:
        """Ask the user about a tool call (the agent awaits this)."""
        if self._yolo:
            return "once"
        answer: asyncio.Future[Approval] = asyncio.get_running_loop().create_future()
        screen = ApprovalScreen(request.tool, request.arguments, request.command_prefix, request.diff, request.allows)

        def done(result: Approval | None) -> None:
            if not answer.done():
                answer.set_result(result or "deny")

        self._host.app.push_screen(screen, callback=done)
        try:
            return await answer
        except asyncio.CancelledError:
            if screen.is_current:
                screen.dismiss("deny")
            raise

    # -- what waits ---------------------------------------------------------------------

    def take_waiting(self) -> Outgoing | None:
        """What waited, joined into one message, and no longer waiting (None: nothing waited)."""
        if not self.waiting:
            return None
        waiting, self.waiting = self.waiting, []
        out = waiting[0]
        for more in waiting[1:]:
            out = out.join(more)
        return out
