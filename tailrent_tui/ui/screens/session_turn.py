"""The turn and the one hop from the agent to the screen.

A turn runs in a worker (`start_turn`); escape cancels it. The agent reports
through typed updates (`ui/messages.py`): the session's listener, the turn's
callbacks and the fold's progress put them on one queue, and one pump applies
them in order in `apply_update`, where a reply, an event and a fold's progress
reach the transcript and the panels (a reply's deltas travel on the same queue,
so a reply and the message that finishes it can never cross). A tool the agent
wants to run is put to the user in `approve` (the agent awaits the answer).

While the agent is busy (a turn, a fold by hand) the input stays open: what
the user sends is queued, shown as queued, and sent once the agent is free.
Escape cancels what runs and gives the queued text back to the input.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from textual.notifications import SeverityLevel

from tailrent_tui.agent.events import (
    MODEL_ERROR_NOTE,
    Approval,
    ApprovalRequest,
    RequestStarted,
    SummaryEnded,
    SummaryStarted,
    TurnCallbacks,
    TurnResult,
)
from tailrent_tui.core.messages import Event, Kind, Note
from tailrent_tui.models.errors import ModelError
from tailrent_tui.ui.messages import (
    AgentNotice,
    ReplyText,
    ReplyThinking,
    ReplyToolCall,
    SessionChanged,
    TurnEnded,
    Update,
    join_text,
)
from tailrent_tui.ui.screens.approval import ApprovalScreen
from tailrent_tui.ui.screens.session_clocks import RentClocks

#: a second ctrl+c within this many seconds quits, as in Claude Code and Codex
QUIT_WINDOW = 2.0

# a notice's level as Textual's notify says it
_SEVERITY: dict[str, SeverityLevel] = {"error": "error", "warning": "warning", "info": "information"}


@dataclass


class Outgoing:
    """A message on its way to the agent, with what goes beside it (paste chips, @files)."""

    text: str
    pastes: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def join(self, other: Outgoing) -> Outgoing:
        files = self.files + [f for f in other.files if f not in self.files]
        return Outgoing(f"{self.text}\n\n{other.text}", {**self.pastes, **other.pastes}, files)


class TurnFeed(RentClocks):
    """The turn worker, the queue of what the agent reports, and what the user sent meanwhile (part of `SessionScreen`)."""

    def _on_session_event(self, event: Event) -> None:
        self._queue.put_nowait(SessionChanged(event))

    async def _pump(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            for item in join_text(batch):
                await self.apply_update(item)
            self.sidebar.flush()
            subtitle = self._sub_title()
            if self.app.sub_title != subtitle:
                self.app.sub_title = subtitle

    async def apply_update(self, item: Update) -> None:
        """One update from the agent onto the widgets: where a reply, an event, a fold's progress reach the screen."""
        transcript = self.transcript
        if not transcript.is_attached:
            return  # the app is closing; the session still has everything
        match item:
            case SessionChanged(event=event):
                await transcript.apply_event(event)
                self.sidebar.note_event(event)
                # the ladder's warnings (a spilled message, auto-pin stopped) are the user's to see
                # a turn's model error is shown once, at the turn's end, with what to do
                if (
                    isinstance(event, Note)
                    and event.level in ("warning", "error")
                    and not event.text.startswith(MODEL_ERROR_NOTE)
                    and await transcript.show_notice(event.text)
                ):
                    self.notify(event.text, severity=event.level)
            case ReplyText(text=text):
                await transcript.reply_text(text)
            case ReplyThinking(text=text):
                await transcript.reply_thinking(text)
            case ReplyToolCall(call=call):
                await transcript.reply_tool_call(call)
            case AgentNotice(text=text, level=level):
                if await transcript.show_notice(text):
                    self.notify(text, severity=_SEVERITY.get(level, "warning"))
            case TurnEnded(result=result):
                await self._turn_ended(result)
            case RequestStarted():
                await transcript.begin_reply(item)
            case SummaryStarted():
                await transcript.begin_fold(item)
                self.sidebar.folds.mark_pending(item)
            case SummaryEnded():
                await transcript.end_fold(item)
                self.sidebar.folds.mark_pending(None)

    async def _turn_ended(self, result: TurnResult | None) -> None:
        await self.transcript.end_turn()
        self.running = False
        if result is None:  # the turn failed on a bug, already reported
            await self._give_back_waiting("the turn failed")
            return
        if result.cancelled:
            # however the turn was cancelled, what waited goes back to the input, never stays unseen
            await self._give_back_waiting("cancelled")
            # escape during a fold or before the reply: the message is still owed one
            self.retry_pending = self._owes_reply()
            if self.retry_pending:
                await self.transcript.show_notice("your message is kept: ctrl+r or /retry sends it")
            return
        error = result.error
        if error is not None:
            self.retry_pending = True
            text = f"model error: {error.message}" + (f"\n{error.hint}" if error.hint else "")
            # one failure, one message: this block (no note beside it, no toast)
            await self.transcript.show_turn_error(text + "\nYour message is kept: ctrl+r or /retry sends it again.")
            await self._give_back_waiting("the model failed")
            return
        self._arm_slot_save()
        await self._send_waiting()
        if not self.running:
            # while the user reads, the next fold's summary may be written ahead; the next send cancels it
            self.run_worker(self._prepare_fold(), group="prepare", name="prepare a fold", exit_on_error=False)

    async def _prepare_fold(self) -> None:
        try:
            await self.agent.prepare_fold()
        except ModelError:
            return  # written again at the next pause, or at the trigger as any fold

    def _owes_reply(self) -> bool:
        """Is the last turn of the conversation a user's message, or a tool's answer to the model's call,
        with no reply after it? What sits in the context without asking for one does not count: the
        project instructions, the ledger, a fold's summary, a `!cmd` and its output, an attached file."""
        placed = (Kind.instructions, Kind.ledger, Kind.fold_summary)
        last = next((m for m in reversed(self.session.messages) if not m.cut_off and m.kind not in placed), None)
        if last is None or last.meta.get("shell"):
            return False
        return (last.role == "user" and last.kind is Kind.chat) or (last.role == "tool" and last.tool_call_id is not None)

    def _turn_callbacks(self) -> TurnCallbacks:
        put = self._queue.put_nowait

        def notice(text: str, level: str = "warning") -> None:
            put(AgentNotice(text, level))

        return TurnCallbacks(
            on_text=lambda delta: put(ReplyText(delta)),
            on_thinking=lambda delta: put(ReplyThinking(delta)),
            on_tool_call=lambda call: put(ReplyToolCall(call)),
            on_notice=notice,
            on_reply_start=put,
            approve=self.approve,
        )

    def start_turn(self, text: str | Outgoing | None) -> None:
        """Run one turn of the agent in a worker; escape cancels it."""
        self.running = True
        self.retry_pending = False
        self._disarm_slot_save()
        # a keep-warm ping or a fold prepared ahead gives way: two requests at once would race for the cache
        self.workers.cancel_group(self, "ping")
        self.workers.cancel_group(self, "prepare")
        out = Outgoing(text) if isinstance(text, str) else text
        self._turn_worker = self.run_worker(self._turn(out), group="turn", name="turn", exit_on_error=False)

    async def _turn(self, out: Outgoing | None) -> None:
        try:
            if out is not None:
                # what goes beside the message enters first, through the ladder as a tool's output does
                for label, body in out.pastes.items():
                    await self.agent.attach_paste(label, body)
                for path in out.files:
                    await self.agent.attach_file(path)
            result = await self.agent.turn(out.text if out is not None else None, self._turn_callbacks())
        except asyncio.CancelledError:
            self._queue.put_nowait(TurnEnded(TurnResult(cancelled=True)))
            raise
        except Exception as exc:  # a bug in a tool or the loop must not take the app down
            self._queue.put_nowait(TurnEnded(None))
            self.notify(f"the turn failed: {exc}", severity="error")
            return
        # the server may have named its model on the first request
        self.app.sub_title = self._sub_title()
        self._queue.put_nowait(TurnEnded(result))

    async def approve(self, request: ApprovalRequest) -> Approval:
        """Ask the user about a tool call (the agent awaits this)."""
        if self.settings.yolo:
            return "once"
        answer: asyncio.Future[Approval] = asyncio.get_running_loop().create_future()
        screen = ApprovalScreen(request.tool, request.arguments, request.command_prefix, request.diff, request.allows)

        def done(result: Approval | None) -> None:
            if not answer.done():
                answer.set_result(result or "deny")

        self.app.push_screen(screen, callback=done)
        try:
            return await answer
        except asyncio.CancelledError:
            if screen.is_current:
                screen.dismiss("deny")
            raise

    def action_cancel_reply(self) -> None:
        # what runs says "escape cancels": that comes first; with nothing running, escape goes back to the input
        worker = self._turn_worker if self.running else (self._fold_worker or self._shell_worker)
        if worker is None or worker.is_finished:
            self.prompt.focus()
            return
        if worker.is_cancelled:
            return  # escape again while the first one lands: a second cancel would cut its cleanup short
        worker.cancel()
        # an action stays synchronous: the command palette calls it without awaiting
        self.call_later(self._give_back_waiting, "cancelled")

    def action_interrupt(self) -> None:
        """ctrl+c: stop what runs, else clear the input; a second ctrl+c within `QUIT_WINDOW` quits."""
        now = time.monotonic()
        armed = self._quit_armed_at
        if armed is not None and now - armed < QUIT_WINDOW:
            self.app.exit()
            return
        self._quit_armed_at = now
        worker = self._turn_worker if self.running else (self._fold_worker or self._shell_worker)
        if worker is not None and not worker.is_finished:
            self.action_cancel_reply()
            self.notify("interrupted; ctrl+c again quits", severity="information", timeout=QUIT_WINDOW)
        elif self.prompt.text:
            self.prompt.action_clear_input()
            self.notify("input cleared (ctrl+z brings it back); ctrl+c again quits", severity="information", timeout=QUIT_WINDOW)
        else:
            self.notify("ctrl+c again quits (the session is saved)", severity="information", timeout=QUIT_WINDOW)

    async def _queue_prompt(self, out: Outgoing) -> None:
        if self._fold_worker is not None:
            when = "when the fold ends"
        elif self.transcript.fold_status is not None:
            when = "after the fold and the reply"
        else:
            when = "when the reply ends"
        self._waiting.append(out)
        await self.transcript.show_queued(out.text, when)
        # said where the eyes are (the input), whatever part of the transcript is on screen
        n = len(self._waiting)
        self.prompt.border_title = f"{n} message{'s' if n > 1 else ''} queued, sent {when} · escape gives back"

    async def _send_waiting(self) -> None:
        """The agent is free again: what the user sent meanwhile goes now, as one message."""
        if not self._waiting or self.busy:
            return
        waiting, self._waiting = self._waiting, []
        out = waiting[0]
        for more in waiting[1:]:
            out = out.join(more)
        await self.transcript.drop_queued()
        self.prompt.border_title = None
        self.start_turn(out)

    async def _give_back_waiting(self, why: str) -> None:
        """What waited is not sent after a cancel or a failure: it goes back to the input, to send or edit."""
        if not self._waiting:
            return
        box = self.prompt
        box.value = "\n\n".join([*(w.text for w in self._waiting), box.value]).strip()
        for w in self._waiting:
            box.pastes.update(w.pastes)
        self._waiting = []
        await self.transcript.drop_queued()
        box.border_title = None
        box.focus()
        self.notify(f"{why}: what you sent meanwhile is back in the input", severity="warning")

    def action_retry(self) -> None:
        if self.busy:
            self.notify("a reply or a fold is running; escape cancels it", severity="warning")
        elif not self.retry_pending:
            self.notify("nothing to retry", severity="information")
        else:
            self.start_turn(None)

