"""SessionScreen: the transcript on the left, the ladder panels on the right, the input below.

The screen renders the session's events and turns keys, palette commands and
slash commands (one table: `ui/actions.py`) into calls on the agent (typed by
`ui/protocol.py`). It never polls the session: a listener, the turn's
callbacks and the fold's progress put typed updates (`ui/messages.py`) on one
queue, and one pump applies them in order in `apply_update` (a reply's deltas
travel on the same queue, so a reply and the message that finishes it can
never cross).

While the agent is busy (a turn, a fold by hand) the input stays open: what
the user sends is queued, shown as queued, and sent once the agent is free.
Escape cancels what runs and gives the queued text back to the input.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message as TextualMessage
from textual.notifications import SeverityLevel
from textual.reactive import var
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header
from textual.worker import Worker

from tailrent_tui.agent.events import (
    Approval,
    ApprovalRequest,
    RequestStarted,
    SummaryEnded,
    SummaryStarted,
    TurnCallbacks,
    TurnResult,
)
from tailrent_tui.core.keepwarm import KeepWarmStatus
from tailrent_tui.core.messages import Event, FoldSkipped, Message, Note
from tailrent_tui.core.ports import ArchiveError
from tailrent_tui.core.rent import get_price_sheet
from tailrent_tui.core.session import Session, SessionError
from tailrent_tui.core.summarize import Review, Verdict
from tailrent_tui.store.history import PromptHistory
from tailrent_tui.ui.actions import BINDINGS, NAVIGATION_ACTIONS, SLASH_HELP, SlashCommand
from tailrent_tui.ui.commands import LadderCommands
from tailrent_tui.ui.completion import Sources, mentions
from tailrent_tui.ui.events import (
    FoldInspectRequested,
    MessageFocused,
    PromptSubmitted,
    SpillOpenRequested,
)
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
from tailrent_tui.ui.protocol import SessionAgent
from tailrent_tui.ui.screens.approval import ApprovalScreen
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.screens.fold_preview import FoldPreview
from tailrent_tui.ui.screens.help import HelpScreen
from tailrent_tui.ui.screens.recall import RecallScreen
from tailrent_tui.ui.screens.spill_viewer import SpillViewer
from tailrent_tui.ui.widgets.completion_menu import CompletionMenu
from tailrent_tui.ui.widgets.folds_panel import FoldsPanel
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.message import MessageView
from tailrent_tui.ui.widgets.notice import NoticeBar
from tailrent_tui.ui.widgets.sidebar import Sidebar
from tailrent_tui.ui.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tailrent_tui.settings import Settings

# a notice's level as Textual's notify says it
_SEVERITY: dict[str, SeverityLevel] = {"error": "error", "warning": "warning", "info": "information"}

# Under this many columns the sidebar hides itself (ctrl+b still shows it).
NARROW_COLUMNS = 100

# The advice of the mock-model notice, as said inside the app
IN_APP_CONNECT = (
    "start Ollama (`ollama serve`) and type /model ollama:NAME, "
    "or /model openai:URL#MODEL for llama.cpp, vLLM or LM Studio"
)


@dataclass
class Outgoing:
    """A message on its way to the agent, with what goes beside it (paste chips, @files)."""

    text: str
    pastes: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def join(self, other: Outgoing) -> Outgoing:
        files = self.files + [f for f in other.files if f not in self.files]
        return Outgoing(f"{self.text}\n\n{other.text}", {**self.pastes, **other.pastes}, files)


class SessionScreen(Screen[None]):
    """One session: its transcript, its ladder panels, the input, and every ladder action."""

    # absolute, so subclasses in other modules find it too
    CSS_PATH = str(Path(__file__).with_name("session.tcss"))
    COMMANDS = {LadderCommands}
    # the focus starts in the input (as `focus_at_start` says), not on the first message
    AUTO_FOCUS = "#input"
    BINDINGS: ClassVar[list[BindingType]] = list(BINDINGS)

    #: a turn is running; the Footer's keys follow it (and the next one)
    running: var[bool] = var(False, bindings=True)
    #: the last turn failed, or was cancelled before its reply: ctrl+r and /retry send it again
    retry_pending: var[bool] = var(False, bindings=True)

    class Ready(TextualMessage):
        """The screen is mounted, its notice said: the app may add its own (journal health, warnings)."""

    def __init__(
        self,
        agent: SessionAgent,
        settings: Settings,
        *,
        clock: Callable[[], float],
        history: PromptHistory,
    ) -> None:
        super().__init__()
        self.agent = agent
        self.settings = settings
        self.clock = clock
        self.prompt_history = history
        self._pinging = False
        self.focused_message_id: str | None = None
        # what the agent reports, in order: the pump applies it (`apply_update`)
        self._queue: asyncio.Queue[Update] = asyncio.Queue()
        self._turn_worker: Worker[None] | None = None
        self._fold_worker: Worker[None] | None = None
        # what the user sent while the agent was busy, in order
        self._waiting: list[Outgoing] = []
        # the sidebar's state chosen with ctrl+b against what the width says (reset when the width crosses NARROW_COLUMNS)
        self._sidebar_flipped = False
        self._narrow: bool | None = None
        self.notice_bar = NoticeBar(id="notice")
        self._slot_timer: Timer | None = None
        self._loading = False  # the model is loading (agent.preload): the header says so

    # -- layout ----------------------------------------------------------------

    @property
    def session(self) -> Session:
        return self.agent.session

    def compose(self) -> ComposeResult:
        # the screen keeps its own references to the widgets the pump and the actions feed
        rent = self.agent.rent
        self.sidebar = Sidebar(
            self.session,
            fold_trigger=self.settings.fold_trigger,
            fold_target=self.settings.fold_target,
            # the rent model's own sheet (a user's prices.toml included); the demo has no rent model
            price_sheet=rent.sheet if rent is not None else get_price_sheet(self.settings.price_sheet),
            clock=self.clock,
            id="sidebar",
        )
        self.sidebar.delegate_tokens = lambda: self.agent.sub_tokens
        self.transcript = Transcript(
            self.session, watermark=self.settings.prune_watermark_lines, clock=self.clock, id="transcript"
        )
        menu = CompletionMenu(id="completion")
        threshold = self.settings.spill_threshold or 2000
        self.prompt = PromptInput(
            self.prompt_history, menu=menu, sources=self._completion_sources(), chip_chars=threshold * 4, id="input"
        )
        yield Header()
        yield self.notice_bar
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield self.transcript
                yield menu
                yield self.prompt
            yield self.sidebar
        yield Footer()

    def _completion_sources(self) -> Sources:
        return Sources(
            workspace=self.agent.workspace,
            message_ids=lambda: [m.id for m in self.session.messages[-40:]],
            fold_numbers=lambda: [f.fold_no for f in self.session.folds],
            theme_names=lambda: list(self.app.available_themes),
        )

    def on_mount(self) -> None:
        self.app.sub_title = self._sub_title()
        self.sidebar.tail.cache_left = self.cache_seconds_left
        self.sidebar.tail.keep_warm = self.keep_warm_status
        self.session.listeners.append(self._on_session_event)
        self.agent.on_summary = self._queue.put_nowait
        self.agent.on_review = self.review_fold
        self.run_worker(self._pump(), group="pump", name="event pump")
        self.set_interval(1.0, self.sidebar.tick, name="cache countdown")
        self.set_interval(1.0, self.keep_warm_tick, name="keep-warm")
        self.set_interval(30.0, self.sidebar.refresh_spills, name="spill ages")
        self.show_agent_notice()
        if self.prompt_history.error:
            self.notify(self.prompt_history.error, severity="warning")
        # the notes that replaying the journal wrote
        for note in self.agent.startup_notes:
            self._queue.put_nowait(AgentNotice(note.text, note.level))
        self.post_message(self.Ready())
        self.focus_at_start()
        self.call_after_refresh(self._start_agent)

    def _start_agent(self) -> None:
        """After the first frame: load the model when it needs it (the embedded engine, a resumed
        Ollama model) with the wait shown in the header, and ask the server for its window, so the
        Tail panel is right before any request."""

        async def run() -> None:
            self._loading = self.agent.will_preload()
            self.app.sub_title = self._sub_title()
            try:
                await self.agent.start()
            except Exception as exc:  # the first turn asks again; the app must open regardless
                self.notify(f"could not ask the server for its window: {exc}", severity="warning")
                return
            finally:
                self._loading = False
                self.app.sub_title = self._sub_title()
            self.sidebar.refresh_window()
            seconds = self.agent.preload_seconds
            if seconds is not None:
                self.notify(f"{self._model_name()} loaded in {seconds:.1f} s", timeout=4)
            # the resume's price and the slot restored; warnings come through their notes already
            for text, level in self.agent.resume_lines:
                if level == "info":
                    self.notify(text, title="resume", timeout=15)

        self.run_worker(run(), group="start", name="ask the server", exit_on_error=False)

    # -- the KV slot (llama.cpp) ----------------------------------------------------

    def _arm_slot_save(self) -> None:
        """After a turn: save the slot once the session has stayed idle for `slot_save_idle` seconds."""
        self._disarm_slot_save()
        keeper = self.agent.slots
        if keeper is None or keeper.state != "on":
            return
        self._slot_timer = self.set_timer(self.settings.slot_save_idle, self._save_slot_idle, name="slot save")

    def _disarm_slot_save(self) -> None:
        timer = self._slot_timer
        if timer is not None:
            timer.stop()
        self._slot_timer = None

    def _save_slot_idle(self) -> None:
        self._slot_timer = None
        keeper = self.agent.slots
        if keeper is None or self.busy:
            return

        async def save() -> None:
            outcome = await keeper.save(f"idle {self.settings.slot_save_idle:g} s")
            if outcome is None or not outcome.line:
                return
            text = "; ".join([outcome.line, *outcome.extra])
            self.notify(text, severity="information" if outcome.ok else "warning", timeout=6 if outcome.ok else 10)

        self.run_worker(save(), group="slot", name="save the KV slot", exit_on_error=False)

    # -- the header, the notice, the rent clocks ---------------------------------------

    def focus_at_start(self) -> None:
        """Where the focus starts: the input box, to type at once."""
        self.prompt.focus()

    def show_agent_notice(self) -> None:
        """The agent's notice (the mock model, a server that did not answer), its advice said the app's way."""
        from tailrent_tui.models.factory import CONNECT_HOW

        notice = self.agent.notice
        if notice:
            notice = notice.replace(CONNECT_HOW, IN_APP_CONNECT)
        self.notice_bar.show(notice)

    def on_unmount(self) -> None:
        if self._on_session_event in self.session.listeners:
            self.session.listeners.remove(self._on_session_event)
        self.agent.on_summary = None
        self.agent.on_review = None

    def _model_name(self) -> str:
        model = self.agent.model.name or "(asking the server)"
        # llama.cpp names its model by the file it loaded: the file name is enough
        return model.rsplit("/", 1)[-1]

    def _sub_title(self) -> str:
        model = self._model_name()
        shown = f"loading {model}… (the first reply waits for it)" if self._loading else f"model {model}"
        parts = [shown, f"policy {self.settings.policy}"]
        if self.session.id:
            parts.append(f"session {self.session.id}")
        if self.settings.yolo:
            parts.append("YOLO: tools run without asking")
        return " · ".join(parts)

    def keep_warm_status(self) -> KeepWarmStatus | None:
        """The keep-warm rule's decision now, for the Tail panel (None without a rent model)."""
        keep_warm = self.agent.keep_warm
        return keep_warm.status(self.clock()) if keep_warm is not None else None

    def keep_warm_tick(self) -> None:
        """Once a second: send a keep-warm ping when the rule says one is due, never during a turn."""
        keep_warm = self.agent.keep_warm
        if keep_warm is None or self.busy or self._pinging or not keep_warm.due(self.clock()):
            return
        self._pinging = True
        self.run_worker(self._ping(), group="ping", name="keep-warm ping", exit_on_error=False)

    async def _ping(self) -> None:
        try:
            await self.agent.ping(self.clock())
        finally:
            self._pinging = False

    def cache_seconds_left(self) -> float | None:
        rent = self.agent.rent
        if rent is None:
            return None
        expires = rent.cache_expires_at
        if expires is None:
            main = [u for u in self.session.usage if u.sub_session is None]
            if not main:
                return None
            sheet = rent.sheet
            expires = main[-1].at + sheet.ttl_seconds
        return expires - self.clock()

    # -- events in, widgets out: the one hop from the agent to the screen -----------

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
                if isinstance(event, Note) and event.level in ("warning", "error") and await transcript.show_notice(event.text):
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
            # escape during a fold or before the reply: the message is still owed one
            self.retry_pending = self._owes_reply()
            if self.retry_pending:
                await self.transcript.show_notice("your message is kept: ctrl+r or /retry sends it")
            return
        error = result.error
        if error is not None:
            self.retry_pending = True
            text = f"model error: {error.message}" + (f"\n{error.hint}" if error.hint else "")
            await self.transcript.show_turn_error(text + "\nYour message is kept: ctrl+r or /retry sends it again.")
            self.notify(error.message, title="model error", severity="error")
            await self._give_back_waiting("the model failed")
            return
        self._arm_slot_save()
        await self._send_waiting()

    def _owes_reply(self) -> bool:
        """Is the last message the model was (or would be) sent a user's or a tool's, with no reply after it?"""
        last = next((m for m in reversed(self.session.messages) if not m.cut_off), None)
        return last is not None and last.role in ("user", "tool")

    # -- the turn ----------------------------------------------------------------

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
        # a keep-warm ping in flight gives way: two requests at once would race for the cache
        self.workers.cancel_group(self, "ping")
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

    @property
    def busy(self) -> bool:
        """A turn or a fold by hand is running: messages wait, folds and shell commands are refused."""
        return self.running or self._fold_worker is not None

    def action_cancel_reply(self) -> None:
        # what runs says "escape cancels": that comes first; with nothing running, escape goes back to the input
        worker = self._turn_worker if self.running else self._fold_worker
        if worker is None or worker.is_finished:
            self.prompt.focus()
            return
        if worker.is_cancelled:
            return  # escape again while the first one lands: a second cancel would cut its cleanup short
        worker.cancel()
        # an action stays synchronous: the command palette calls it without awaiting
        self.call_later(self._give_back_waiting, "cancelled")

    async def _queue_prompt(self, out: Outgoing) -> None:
        if self._fold_worker is not None:
            when = "when the fold ends"
        elif self.transcript.fold_status is not None:
            when = "after the fold and the reply"
        else:
            when = "when the reply ends"
        self._waiting.append(out)
        await self.transcript.show_queued(out.text, when)

    async def _send_waiting(self) -> None:
        """The agent is free again: what the user sent meanwhile goes now, as one message."""
        if not self._waiting or self.busy:
            return
        waiting, self._waiting = self._waiting, []
        out = waiting[0]
        for more in waiting[1:]:
            out = out.join(more)
        await self.transcript.drop_queued()
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
        box.focus()
        self.notify(f"{why}: what you sent meanwhile is back in the input", severity="warning")

    def action_retry(self) -> None:
        if self.busy:
            self.notify("a reply or a fold is running; escape cancels it", severity="warning")
        elif not self.retry_pending:
            self.notify("nothing to retry", severity="information")
        else:
            self.start_turn(None)

    # -- the input -----------------------------------------------------------

    async def on_prompt_submitted(self, event: PromptSubmitted) -> None:
        box = self.prompt
        text = event.text
        if text.startswith("/"):
            accepted = await self.run_slash(text)
        elif text.startswith("!"):
            accepted = self._run_shell(text[1:].strip())
        else:
            out = Outgoing(text, event.pastes, self._mentioned_files(text))
            if self.busy:
                await self._queue_prompt(out)
            else:
                self.start_turn(out)
            accepted = True
        if accepted:
            box.remember(text)
            box.value = ""
            if box.prompt_history.error:
                self.notify(box.prompt_history.error, severity="warning")
                box.prompt_history.error = None

    def _mentioned_files(self, text: str) -> list[str]:
        """The `@path` mentions that name a file in the workspace (others, like @someone, are just text)."""
        workspace = self.agent.workspace
        if workspace is None:
            return []
        root = Path(workspace).resolve()
        files = []
        for path in mentions(text):
            real = (root / path).resolve()
            if (real == root or root in real.parents) and real.is_file():
                files.append(path)
        return files

    def _run_shell(self, command: str) -> bool:
        if not command:
            self.notify("!cmd runs a shell command: type one after the !", severity="error")
            return False
        if self.busy:
            self.notify("a reply or a fold is running: wait, or press escape to cancel it", severity="warning")
            return False

        async def run() -> None:
            try:
                await self.agent.shell(command)
            except Exception as exc:  # the command's failure is the user's to read, not a crash
                self.notify(f"!{command} failed: {exc}", severity="error")

        self.run_worker(run(), group="shell", exit_on_error=False)
        return True

    async def run_slash(self, text: str) -> bool:
        """Run a slash command; False (input kept) when it is unknown or malformed."""
        name, _, rest = text[1:].partition(" ")
        rest = rest.strip()
        handler = getattr(self, f"_slash_{name.replace('-', '_')}", None) if name in SLASH_HELP else None
        if handler is None:
            self.notify(f"unknown command /{name}: /help lists the commands", severity="error")
            return False
        return await handler(rest)

    async def _slash_pin(self, rest: str) -> bool:
        return self.pin(rest or None, fallback_last=True)

    async def _slash_unpin(self, rest: str) -> bool:
        return self.unpin(rest or None, fallback_last=True)

    async def _slash_spill(self, rest: str) -> bool:
        return self.spill(rest or None, fallback_last=True)

    async def _slash_fold(self, rest: str) -> bool:
        ids = rest.split() or None
        if ids:
            missing = [i for i in ids if i not in self.session]
            if missing:
                self.notify(f"no message with id {missing[0]}", severity="error")
                return False
        return self.start_fold(ids)

    async def _slash_inspect(self, rest: str) -> bool:
        if rest:
            if not rest.isdigit():
                self.notify("/inspect takes a fold number", severity="error")
                return False
            return self.inspect(int(rest))
        return self.inspect(None)

    async def _slash_unfold(self, rest: str) -> bool:
        if not rest.strip().lstrip("#").isdigit():
            self.notify("/unfold takes a fold number (the Folds panel lists them)", severity="error")
            return False
        return self.unfold(int(rest.strip().lstrip("#")))

    async def _slash_watch(self, rest: str) -> bool:
        if not rest:
            self.notify("/watch WORD: name the word to watch", severity="error")
            return False
        try:
            added = self.agent.watch(rest)
        except (SessionError, ValueError) as exc:
            self.notify(str(exc), severity="error")
            return False
        self.notify(f"watching {rest!r}: it counts as a fact in every fold" if added else f"already watching {rest!r}")
        return True

    async def _slash_recall(self, rest: str) -> bool:
        try:
            words = shlex.split(rest)
        except ValueError:
            words = rest.split()
        question_words: list[str] = []
        expect: list[str] = []
        target = question_words
        for w in words:
            if w == "--expect":
                target = expect
                continue
            target.append(w)
        question = " ".join(question_words)
        if not question and not expect:
            self.notify("/recall QUESTION [--expect WORD ...]", severity="error")
            return False
        try:
            report, unreadable = self.agent.recall(question, expect)
        except (ValueError, SessionError) as exc:
            self.notify(str(exc), severity="error")
            return False
        for reason in unreadable:
            self.notify(f"not searched: {reason}", severity="warning")
        self.app.push_screen(RecallScreen(report))
        return True

    async def _slash_model(self, rest: str) -> bool:
        if not rest:
            self.notify(f"the model is {self.agent.model.name}; /model SPEC switches it", severity="information")
            return True

        async def switch() -> None:
            try:
                await self.agent.switch_model(rest)
            except Exception as exc:  # a bad spec or a server that does not answer: say which
                self.notify(f"could not switch to {rest}: {exc}", severity="error")
                return
            self.app.sub_title = self._sub_title()
            self.show_agent_notice()
            self.notify(f"model: {self.agent.model.name}")

        self.run_worker(switch(), group="model", exit_on_error=False)
        return True

    async def _slash_export(self, rest: str) -> bool:
        """`/export [md|json] [PATH]`: into the session's directory unless a path is given."""
        fmt, _, target = rest.strip().partition(" ")
        if fmt not in ("md", "json"):
            fmt, target = Path(rest.strip()).suffix[1:], rest.strip()
            if fmt not in ("md", "json"):
                self.notify("/export md, /export json, or a path ending in .md or .json", severity="error")
                return False
        try:
            path = self.agent.export(fmt, Path(target.strip()) if target.strip() else None)
        except (OSError, ValueError) as exc:
            self.notify(f"export failed: {exc}", severity="error")
            return False
        self.notify(f"exported to {path}", timeout=15)
        return True

    def run_palette_slash(self, command: SlashCommand) -> None:
        """A slash command chosen in the palette: run it, or (if it needs an argument) start it in the input."""
        if command.needs_arg:
            box = self.prompt
            box.value = f"/{command.name} "
            box.focus()
            box.refresh_completion()
            return
        self.run_worker(self.run_slash(f"/{command.name}"), group="palette", exit_on_error=False)

    async def _slash_copy(self, rest: str) -> bool:
        self.copy_last_reply()
        return True  # nothing to copy yet is no typo to fix: the input is cleared all the same

    async def _slash_theme(self, rest: str) -> bool:
        if rest not in self.app.available_themes:
            names = ", ".join(sorted(self.app.available_themes))
            self.notify(f"/theme NAME, one of: {names}", severity="error")
            return False
        self.app.theme = rest
        return True

    async def _slash_history(self, rest: str) -> bool:
        self.prompt.action_search_history()
        return True

    async def _slash_retry(self, rest: str) -> bool:
        self.action_retry()
        return True

    async def _slash_help(self, rest: str) -> bool:
        self.action_help()
        return True

    # -- ladder actions ------------------------------------------------------------

    def target_message(self, message_id: str | None = None, *, fallback_last: bool = False) -> Message | None:
        """The message an action applies to: the given id, the focused one, or (for commands) the last."""
        s = self.session
        if message_id is not None:
            if message_id in s:
                return s.get(message_id)
            self.notify(f"no message with id {message_id}", severity="error")
            return None
        focused = self.focused
        if isinstance(focused, MessageView) and focused.message_id is not None and focused.message_id in s:
            return s.get(focused.message_id)
        if self.focused_message_id is not None and self.focused_message_id in s:
            return s.get(self.focused_message_id)
        if fallback_last and s.messages:
            return s.messages[-1]
        self.notify("focus a message first (tab, then up/down)", severity="warning")
        return None

    def pin(self, message_id: str | None = None, *, fallback_last: bool = False) -> bool:
        m = self.target_message(message_id, fallback_last=fallback_last)
        if m is None:
            return False
        if m.pinned:
            self.notify("already pinned")
            return True
        try:
            self.agent.pin(m.id)
        except (SessionError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return False
        return True

    def unpin(self, message_id: str | None = None, *, fallback_last: bool = False) -> bool:
        m = self.target_message(message_id, fallback_last=fallback_last)
        if m is None:
            return False
        if not m.pinned:
            self.notify("not pinned")
            return True
        try:
            self.agent.unpin(m.id)
        except (SessionError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return False
        return True

    def spill(self, message_id: str | None = None, *, fallback_last: bool = False) -> bool:
        m = self.target_message(message_id, fallback_last=fallback_last)
        if m is None:
            return False
        try:
            self.agent.spill(m.id)
        except (SessionError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return False
        return True

    def start_fold(self, span_ids: list[str] | None = None) -> bool:
        """Fold by hand in a worker, unless the agent is busy: two plans must never edit the session at once."""
        if self.busy:
            self.notify("a reply or a fold is running: fold when it ends, or press escape to cancel it", severity="warning")
            return False
        self._fold_worker = self.run_worker(self._fold_by_hand(span_ids), group="fold", name="fold", exit_on_error=False)
        return True

    async def _fold_by_hand(self, span_ids: list[str] | None) -> None:
        try:
            await self.fold(span_ids)
        finally:
            self._fold_worker = None
        await self._send_waiting()

    async def fold(self, span_ids: list[str] | None = None) -> None:
        """Fold a span (the given ids, else the marked ones, else down to the fold target)."""
        if span_ids is None:
            span_ids = self.transcript.selected_ids or None
        try:
            result = await self.agent.fold(span_ids)
        except Exception as exc:  # SessionError (a pin in the span), FoldAborted (archive), a summarizer's failure
            self.notify(f"fold failed: {exc}", severity="error")
            return
        if isinstance(result, FoldSkipped):
            self.notify(result.reason, severity="warning")

    def fold_no_of(self, message_id: str) -> int | None:
        for f in self.session.folds:
            if f.summary.id == message_id:
                return f.fold_no
        return None

    def inspect(self, fold_no: int | None) -> bool:
        folds = {f.fold_no: f for f in self.session.folds}
        if not folds:
            self.notify("no folds yet", severity="warning")
            return False
        if fold_no is None:
            focused = self.focused
            if isinstance(focused, MessageView) and focused.message is not None:
                fold_no = self.fold_no_of(focused.message.id)
            elif isinstance(focused, FoldsPanel) and focused.highlighted_option is not None:
                fold_no = int(focused.highlighted_option.id or 0)
        if fold_no is None:
            fold_no = max(folds)
        record = folds.get(fold_no)
        if record is None:
            self.notify(f"no fold #{fold_no}", severity="error")
            return False
        originals, error = None, None
        try:
            originals = self.agent.fold_originals(fold_no)
        except ArchiveError as exc:
            error = f"the originals cannot be shown: {exc}"
        def closed(result: str | None) -> None:
            if result == "unfold":
                self.unfold(fold_no)

        self.app.push_screen(FoldInspector(record, originals, error), callback=closed)
        return True

    def unfold(self, fold_no: int) -> bool:
        """Undo a fold (`/unfold N`, `u` in the inspector); a one-line reason when it cannot be."""
        if self.busy:
            self.notify("a reply or a fold is running: unfold when it ends, or press escape to cancel it", severity="warning")
            return False
        try:
            event = self.agent.unfold(fold_no)
        except (SessionError, ArchiveError) as exc:
            self.notify(str(exc), severity="error")
            return False
        n = len(event.originals)
        self.notify(f"fold #{fold_no} undone: its {n} original message{'s' if n != 1 else ''} are back in the context")
        return True

    async def review_fold(self, review: Review) -> Verdict:
        """Show a fold before it applies (the agent's reviewer); the preview's answer goes back to the plan."""
        done: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        reread, seconds = self.agent.reread_after(review.record)

        def answered(verdict: Verdict | None) -> None:
            if not done.done():
                done.set_result(verdict if verdict is not None else Verdict(apply=False))

        self.app.push_screen(FoldPreview(review, reread=reread, seconds=seconds), callback=answered)
        try:
            return await done
        except asyncio.CancelledError:
            # the fold was cancelled under the preview (escape, quit): close it
            if isinstance(self.app.screen, FoldPreview):
                self.app.screen.dismiss(Verdict(apply=False))
            raise

    def open_spill(self, spill_id: str) -> bool:
        spilled = self.session.spills.get(spill_id)
        if spilled is None:
            self.notify(f"no spill {spill_id}", severity="error")
            return False
        text, error = None, None
        try:
            text = self.agent.spill_text(spill_id)
        except (OSError, KeyError, ValueError) as exc:
            error = f"spill {spill_id} cannot be read: {exc}"
        self.app.push_screen(SpillViewer(spilled, text, error))
        return True

    def action_pin(self) -> None:
        self.pin()

    def action_unpin(self) -> None:
        self.unpin()

    def action_spill(self) -> None:
        self.spill()

    def action_fold(self) -> None:
        self.start_fold()

    def action_inspect(self) -> None:
        self.inspect(None)

    def action_toggle_sidebar(self) -> None:
        self._sidebar_flipped = not self._sidebar_flipped
        self._place_sidebar()

    def _place_sidebar(self) -> None:
        hidden = bool(self._narrow) != self._sidebar_flipped
        self.sidebar.set_class(hidden, "-hidden")

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW_COLUMNS
        if narrow != self._narrow:
            self._narrow = narrow
            self._sidebar_flipped = False
            self._place_sidebar()

    def action_dismiss_notice(self) -> None:
        self.notice_bar.show(None)
        self.refresh_bindings()

    def copy_last_reply(self) -> bool:
        """The last reply's text to the clipboard (OSC 52: the terminal must allow it; tmux needs set-clipboard on)."""
        reply = next((m for m in reversed(self.session.messages) if m.role == "assistant" and m.content.strip()), None)
        if reply is None:
            self.notify("no reply to copy yet", severity="warning")
            return False
        self.app.copy_to_clipboard(reply.content)
        self.notify(f"copied the last reply ({len(reply.content):,} characters)")
        return True

    # -- focus: the input, or navigation among the messages ------------------------------

    @property
    def mode(self) -> str:
        """"input" while the input has the focus (or nothing has), else "navigation"."""
        if not self.is_current:
            return "input"  # a dialog is open: its keys are its own
        focused = self.focused
        return "input" if focused is None or isinstance(focused, PromptInput) else "navigation"

    def return_to_input(self, key: str, character: str | None) -> None:
        """Leave navigation for the input, and hand it the key that did so.

        The focus moves at once (not after a refresh, as `focus()` does), and
        the key is dispatched again, so it reaches the input as if typed there.
        A terminal sends a typed burst at once: the keys behind this one are
        already on their way to the message and come back here the same way.
        """
        self.set_focus(self.prompt)
        self.app.post_message(events.Key(key, character))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._show_mode()

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self._show_mode()

    def _show_mode(self) -> None:
        box = self.prompt
        if self.mode == "navigation":
            box.border_title = "navigation: p u s f i c act on the message · esc or typing: back here"
        else:
            box.border_title = None
        box.set_class(self.mode == "navigation", "-navigating")
        self.refresh_bindings()

    def on_key(self, event: events.Key) -> None:
        """In navigation (a panel has the focus), a printable key that no binding takes returns to the input.

        A message does the same itself (`MessageView.on_key`), for `/` too.
        """
        if self.mode != "navigation" or not event.is_printable or event.character is None:
            return
        if event.character != "/" and event.key in self.active_bindings:
            return
        event.stop()
        event.prevent_default()
        self.return_to_input(event.key, event.character)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.key_table(), SLASH_HELP))

    def key_table(self) -> list[tuple[str, str, str]]:
        """(keys, what, binding id) of the app's, the session's, the input's and a message's bindings, after the keymap."""
        keymap = self.app._keymap
        rows = []
        for binding in [*type(self.app).BINDINGS, *BINDINGS, *PromptInput.BINDINGS, *MessageView.BINDINGS]:
            if isinstance(binding, Binding) and binding.id:
                keys = keymap.get(binding.id, binding.key)
                rows.append((keys, binding.tooltip or binding.description, binding.id))
        return rows

    def _typed_key(self, action: str) -> bool:
        """Is the key bound to this action (after the keymap) one the input types?"""
        keys = self.app._keymap.get(action, next((b.key for b in BINDINGS if b.id == action), ""))
        return any(len(k.strip()) == 1 for k in keys.split(","))

    def on_message_focused(self, event: MessageFocused) -> None:
        self.focused_message_id = event.message_id
        view = self.transcript.view_of(event.message_id)
        if view is not None and not view.has_focus:
            view.focus()
            view.scroll_visible(animate=False)

    def on_spill_open_requested(self, event: SpillOpenRequested) -> None:
        self.open_spill(event.spill_id)

    def on_fold_inspect_requested(self, event: FoldInspectRequested) -> None:
        self.inspect(event.fold_no)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in NAVIGATION_ACTIONS and self.mode == "input" and self._typed_key(action):
            return False  # the input takes that key: not shown, never fired from there
        if action == "dismiss_notice":
            return self.notice_bar.has_class("-shown")
        if action == "cancel_reply":
            return True
        if action == "retry":
            return True if self.retry_pending else None
        return True


_NAVIGATION_ACTIONS = {"pin", "unpin", "spill", "fold", "inspect"}
