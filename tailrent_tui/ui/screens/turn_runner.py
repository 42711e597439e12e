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
from typing import Any, Literal

from textual.screen import Screen
from textual.worker import Worker

from tailrent_tui.agent.events import Approval, ApprovalRequest, RequestStarted, TurnCallbacks, TurnResult
from tailrent_tui.core.messages import Kind, ToolCall
from tailrent_tui.ui.chips import Outgoing
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
        before = {m.id for m in self._agent.session.messages}
        #: the pastes in the session: each enters as its call starts (the ladder's fold, if any, comes after)
        attached: list[str] = []
        try:
            if out is not None:
                # what goes beside the message enters first, through the ladder as a tool's output does
                for label, body in out.pastes.items():
                    attached.append(label)
                    await self._agent.tools.attach_paste(label, body)
                for path in out.files:
                    await self._agent.tools.attach_file(path)
            result = await self._agent.turn(out.text if out is not None else None, self.callbacks())
        except asyncio.CancelledError:
            self.post(TurnEnded(TurnResult(cancelled=True), unsent=self._unsent(out, before, attached)))
            raise
        except Exception as exc:  # a bug in a tool or the loop must not take the app down
            self.post(TurnEnded(None, unsent=self._unsent(out, before, attached)))
            self._host.notify(f"the turn failed: {exc}", severity="error")
            return
        self.post(TurnEnded(result))

    def _unsent(self, out: Outgoing | None, before: set[str], attached: list[str]) -> Outgoing | None:
        """The message, when the turn stopped before it entered the session (its pastes taken in, the
        model starting): given back to the input, never lost. The pastes already in the session stay
        there; the message's text still names them by their labels."""
        if out is None:
            return None
        if any(m.role == "user" and m.kind is Kind.chat and m.id not in before for m in self._agent.session.messages):
            return None  # it is in the session: a reply is owed (ctrl+r), not a second copy
        return Outgoing(out.text, {k: v for k, v in out.pastes.items() if k not in attached}, out.files)

    def start_fold(self, job: Coroutine[Any, Any, None], then: Callable[[], Awaitable[None]]) -> None:
        """Run a fold by hand in a worker; `then` runs once it is over (not after a cancel) and the agent is free."""
        self._fold = self._host.run_worker(self._run_then(job, then, "_fold"), group="fold", name="fold", exit_on_error=False)

    def start_shell(self, job: Coroutine[Any, Any, None], then: Callable[[], Awaitable[None]]) -> None:
        """Run a `!cmd` in a worker; `then` runs once it is over (not after a cancel) and the agent is free."""
        self._shell = self._host.run_worker(self._run_then(job, then, "_shell"), group="shell", exit_on_error=False)

    async def _run_then(
        self, job: Coroutine[Any, Any, None], then: Callable[[], Awaitable[None]], slot: Literal["_fold", "_shell"]
    ) -> None:
        try:
            await job
        finally:
            setattr(self, slot, None)  # free before `then`, which sends what waited for it
        await then()

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
