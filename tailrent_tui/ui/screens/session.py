"""SessionScreen: the transcript on the left, the ladder panels on the right, the input below.

The screen renders the session's events and turns keys, palette entries and
slash commands (one table: `ui/actions.py`) into calls on the agent (typed by
`ui/protocol.py`). It composes its parts rather than inheriting them:

- a turn, a fold by hand and a `!cmd` run in the turn runner (`turn_runner.py`): its worker, the
  messages waiting for it, a tool's approval, cancel;
- what the agent reports reaches the widgets as Textual messages (`ui/messages.py`), handled here
  (`@on(ReplyText)`...): a reply, an event, a fold's progress;
- the ladder's actions by hand (pin, fold, inspect...) are `LadderActions`' (`ladder_actions.py`);
- the slash commands are functions named in the action table (`ui/slash.py`);
- the keep-warm ping, the cache countdown and the KV slot's idle save are `RentClocks`' (`rent_clocks.py`).

The widgets get their data by constructor; what they ask for comes up as
messages (`ui/events.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message as TextualMessage
from textual.notifications import SeverityLevel
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, Header

from tailrent_tui.agent.events import MODEL_ERROR_NOTE, SummaryStarted
from tailrent_tui.core.messages import Kind, Note
from tailrent_tui.core.rent import get_price_sheet
from tailrent_tui.core.session import Session
from tailrent_tui.models.errors import ModelError
from tailrent_tui.store.history import PromptHistory
from tailrent_tui.text import model_label
from tailrent_tui.ui.actions import BINDINGS, NAVIGATION_ACTIONS, SLASH_BY_NAME, SLASH_HELP
from tailrent_tui.ui.chips import Outgoing, merge_chips
from tailrent_tui.ui.commands import LadderCommands
from tailrent_tui.ui.completion import Sources, mentioned_files
from tailrent_tui.ui.events import (
    FoldInspectRequested,
    MessageFocused,
    PaletteAction,
    PaletteSlash,
    PromptSubmitted,
    SpillOpenRequested,
)
from tailrent_tui.ui.messages import (
    AgentNotice,
    AgentUpdate,
    FoldPrepared,
    FoldProgress,
    ReplyStarted,
    ReplyText,
    ReplyThinking,
    ReplyToolCall,
    SessionChanged,
    TurnEnded,
)
from tailrent_tui.ui.protocol import SessionAgent
from tailrent_tui.ui.screens.help import HelpScreen
from tailrent_tui.ui.screens.ladder_actions import LadderActions
from tailrent_tui.ui.screens.rent_clocks import RentClocks
from tailrent_tui.ui.screens.turn_runner import TurnRunner
from tailrent_tui.ui.widgets.completion_menu import CompletionMenu
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.message import MessageView
from tailrent_tui.ui.widgets.notice import NoticeBar
from tailrent_tui.ui.widgets.sidebar import Gauges, Sidebar
from tailrent_tui.ui.widgets.tail_panel import TailFigures
from tailrent_tui.ui.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tailrent_tui.agent.events import SummaryProgress, TurnResult
    from tailrent_tui.core.messages import Event
    from tailrent_tui.settings import Settings

# Under this many columns the sidebar hides itself (ctrl+b still shows it).
NARROW_COLUMNS = 100
#: a second ctrl+c within this many seconds quits, as in Claude Code and Codex
QUIT_WINDOW = 2.0
# The advice of the mock-model notice, as said inside the app
IN_APP_CONNECT = (
    "start Ollama (`ollama serve`) and type /model ollama:NAME, or /model openai:URL#MODEL for llama.cpp, vLLM or LM Studio"
)
# a notice's level as Textual's notify says it
_SEVERITY: dict[str, SeverityLevel] = {"error": "error", "warning": "warning", "info": "information"}


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
        self.focused_message_id: str | None = None
        self.notice_bar = NoticeBar(id="notice")
        self.runner = TurnRunner(self, agent, yolo=settings.yolo)
        self.ladder = LadderActions(self)
        self.clocks = RentClocks(self, agent, clock=clock, busy=lambda: self.busy)
        self._loading = False  # the model is loading (agent.preload): the header says so
        self._flush_pending = False  # the sidebar and the header are redrawn once per run of updates
        #: when ctrl+c was last pressed: a second one soon after quits (`action_interrupt`)
        self._quit_armed_at: float | None = None
        # the sidebar's state chosen with ctrl+b against what the width says (reset when the width crosses NARROW_COLUMNS)
        self._sidebar_flipped = False
        self._narrow: bool | None = None

    @property
    def session(self) -> Session:
        return self.agent.session

    @property
    def busy(self) -> bool:
        """A turn, a fold by hand or a `!cmd` is running: messages wait, folds and other commands are
        refused (a turn beside a `!cmd` would answer before its output, which then lands mid-turn)."""
        return self.running or self.runner.folding or self.runner.shell_running

    # -- layout ----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # the screen keeps its own references to the widgets the updates and the actions feed
        rent = self.agent.rent
        hub = self.agent.mcp
        self.sidebar = Sidebar(
            self.session,
            fold_trigger=self.settings.fold.trigger,
            fold_target=self.settings.fold.target,
            # the rent model's own sheet (a user's prices.toml included); the demo has no rent model
            price_sheet=rent.sheet if rent is not None else get_price_sheet(self.settings.price_sheet),
            clock=self.clock,
            gauges=Gauges(
                delegate_tokens=lambda: self.agent.sub_tokens,
                mcp_tokens=hub.schema_tokens if hub is not None else dict,
                placement=self._placement,
                cache_left=self.clocks.cache_seconds_left,
                keep_warm=self.clocks.keep_warm_status,
            ),
            id="sidebar",
        )
        self.transcript = Transcript(self.session, clock=self.clock, id="transcript")
        menu = CompletionMenu(id="completion")
        threshold = self.settings.tools.spill_threshold
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

    def _placement(self) -> tuple[str, str] | None:
        """Where folds put their summary and why, once the agent has found out (None: not said)."""
        keeper = self.agent.placement
        if keeper is None or not keeper.detected:
            return None
        lines: tuple[str, str] = keeper.state.panel_lines()
        return lines

    def _completion_sources(self) -> Sources:
        return Sources(
            workspace=self.agent.workspace,
            message_ids=lambda: [m.id for m in self.session.messages[-40:]],
            fold_numbers=lambda: [f.fold_no for f in self.session.folds],
            theme_names=lambda: list(self.app.available_themes),
        )

    def on_mount(self) -> None:
        self.refresh_sub_title()
        self.session.listeners.append(self._on_session_event)
        self.agent.fold_requests.on_summary = self._on_summary
        self.agent.ladder.on_review = self.ladder.review_fold
        self.agent.fold_requests.on_prepared = self._on_prepared
        self.set_interval(1.0, self.sidebar.tick, name="cache countdown")
        self.set_interval(1.0, self.clocks.keep_warm_tick, name="keep-warm")
        self.set_interval(30.0, self.sidebar.refresh_spills, name="spill ages")
        self.show_agent_notice()
        if self.prompt_history.error:
            self.notify(self.prompt_history.error, severity="warning")
        # the notes that replaying the journal wrote
        for note in self.agent.startup_notes:
            self.runner.post(AgentNotice(note.text, note.level))
        if self._owes_reply():
            # the session stopped before its last message was answered (a crash mid-reply)
            self.retry_pending = True
            self.runner.post(
                AgentNotice(
                    "the last message has no reply (the session stopped before it came): ctrl+r or /retry answers it",
                    "warning",
                )
            )
        self.post_message(self.Ready())
        self.focus_at_start()
        self.call_after_refresh(self._start_agent)
        self.call_after_refresh(self.start_mcp)

    def _on_session_event(self, event: Event) -> None:
        self.runner.post(SessionChanged(event))

    def _on_summary(self, progress: SummaryProgress) -> None:
        self.runner.post(FoldProgress(progress))

    def _on_prepared(self, prepared: object) -> None:
        self.runner.post(FoldPrepared(prepared))

    def _start_agent(self) -> None:
        """After the first frame: load the model when it needs it (the embedded engine, a resumed
        Ollama model) with the wait shown in the header, and ask the server for its window, so the
        Tail panel is right before any request."""

        async def run() -> None:
            self._loading = self.agent.link.will_preload()
            self.refresh_sub_title()
            try:
                await self.agent.link.start()
            except Exception as exc:  # the first turn asks again; the app must open regardless
                self.notify(f"could not ask the server for its window: {exc}", severity="warning")
                return
            finally:
                self._loading = False
                self.refresh_sub_title()
            self.sidebar.refresh_window()
            seconds = self.agent.link.preload_seconds
            if seconds is not None:
                self.notify(f"{self._model_name()} loaded in {seconds:.1f} s", timeout=4)
            # the resume's price and the slot restored, kept in the transcript (why the first request
            # reads what it reads: a slot another client took, a restarted server); warnings come
            # through their notes already
            for text, level in self.agent.link.resume_lines:
                if level == "info":
                    await self.transcript.show_notice(text)

        self.run_worker(run(), group="start", name="ask the server", exit_on_error=False)

    def start_mcp(self) -> None:
        """After the first frame: start the MCP servers in the background; they stop when the worker
        does (quit, or the app's end), and each says how it went in one note."""
        hub = self.agent.mcp
        if hub is not None:
            self.run_worker(hub.start(), group="mcp", name="mcp servers", exit_on_error=False)

    def focus_at_start(self) -> None:
        """Where the focus starts: the input box, to type at once."""
        self.prompt.focus()

    async def on_unmount(self) -> None:
        if self._on_session_event in self.session.listeners:
            self.session.listeners.remove(self._on_session_event)
        self.agent.fold_requests.on_summary = None
        self.agent.ladder.on_review = None
        self.agent.fold_requests.on_prepared = None
        # the MCP servers stop while the loop still runs (quit, or the app's end); launch kills any survivor
        hub = self.agent.mcp
        if hub is not None and hub.started:
            await hub.aclose()

    # -- the header, the notice ----------------------------------------------------------

    def show_agent_notice(self) -> None:
        """The agent's notice (the mock model, a server that did not answer), its advice said the app's way."""
        from tailrent_tui.models.factory import CONNECT_HOW

        notice = self.agent.notice
        if notice:
            notice = notice.replace(CONNECT_HOW, IN_APP_CONNECT)
        self.notice_bar.show(notice)

    def refresh_header(self) -> None:
        """The model changed: the header and the notice say the new one."""
        self.refresh_sub_title()
        self.show_agent_notice()

    def refresh_sub_title(self) -> None:
        subtitle = self._sub_title()
        if self.app.sub_title != subtitle:
            self.app.sub_title = subtitle

    def _model_name(self) -> str:
        # llama.cpp names its model by the file it loaded: the file name is enough
        return model_label(self.agent.model.name) if self.agent.model.name else "(asking the server)"

    def _sub_title(self) -> str:
        model = self._model_name()
        shown = f"loading {model}… (the first reply waits for it)" if self._loading else f"model {model}"
        # first, so that it stays on screen at 80 columns when the sidebar hides itself
        parts = [context_left(self.session.context_tokens, self.session.window), shown, f"policy {self.settings.policy}"]
        if self.session.id:
            parts.append(f"session {self.session.id}")
        if self.settings.yolo:
            parts.append("YOLO: tools run without asking")
        return " · ".join(parts)

    @property
    def tail_figures(self) -> TailFigures | None:
        """The Tail panel's figures (what `/mcp disable` saves is said in its terms)."""
        return self.sidebar.tail.figures

    # -- what the agent reports: one handler per kind, in the order posted ------------------------

    @on(SessionChanged)
    async def _session_changed(self, update: SessionChanged) -> None:
        event = update.event
        if not await self._attached(update):
            return
        await self.transcript.apply_event(event)
        self.sidebar.note_event(event)
        # the ladder's warnings (a spilled message, auto-pin stopped) are the user's to see
        # a turn's model error is shown once, at the turn's end, with what to do
        if (
            isinstance(event, Note)
            and event.level in ("warning", "error")
            and not event.text.startswith(MODEL_ERROR_NOTE)
            and await self.transcript.show_notice(event.text)
        ):
            self.notify(event.text, severity=event.level)

    @on(ReplyText)
    async def _reply_text(self, update: ReplyText) -> None:
        text = update.take()
        if await self._attached(update):
            await self.transcript.reply_text(text)

    @on(ReplyThinking)
    async def _reply_thinking(self, update: ReplyThinking) -> None:
        if await self._attached(update):
            await self.transcript.reply_thinking(update.text)

    @on(ReplyToolCall)
    async def _reply_tool_call(self, update: ReplyToolCall) -> None:
        if await self._attached(update):
            await self.transcript.reply_tool_call(update.call)

    @on(ReplyStarted)
    async def _reply_started(self, update: ReplyStarted) -> None:
        if await self._attached(update):
            await self.transcript.begin_reply(update.started)

    @on(AgentNotice)
    async def _agent_notice(self, update: AgentNotice) -> None:
        if await self._attached(update) and await self.transcript.show_notice(update.text):
            self.notify(update.text, severity=_SEVERITY.get(update.level, "warning"))

    @on(FoldProgress)
    async def _fold_progress(self, update: FoldProgress) -> None:
        if not await self._attached(update):
            return
        progress = update.progress
        if isinstance(progress, SummaryStarted):
            await self.transcript.begin_fold(progress)
            self.sidebar.folds.mark_pending(progress)
        else:
            await self.transcript.end_fold(progress)
            self.sidebar.folds.mark_pending(None)

    @on(FoldPrepared)
    def _fold_prepared(self, update: FoldPrepared) -> None:
        self.sidebar.folds.mark_prepared(update.prepared)

    @on(TurnEnded)
    async def _turn_ended_update(self, update: TurnEnded) -> None:
        if await self._attached(update):
            await self._turn_ended(update.result, update.unsent)

    async def _attached(self, update: AgentUpdate) -> bool:
        """Whether the widgets are still there (the app may be closing, its widgets going: the
        session has everything); after this run of updates, the sidebar and the header are redrawn once."""
        if not self.transcript.is_attached or self._closing or self.app._exit:
            return False
        if not self._flush_pending:
            self._flush_pending = True
            self.call_later(self._flush)
        return True

    def _flush(self) -> None:
        self._flush_pending = False
        if self.transcript.is_attached:
            self.sidebar.flush()
            self.refresh_sub_title()

    # -- the turn ------------------------------------------------------------------------

    def start_turn(self, text: str | Outgoing | None) -> None:
        """Run one turn of the agent in the runner's worker; escape cancels it."""
        self.running = True
        self.retry_pending = False
        self.clocks.disarm_slot_save()
        # a keep-warm ping or a fold prepared ahead gives way: two requests at once would race for the cache
        self.workers.cancel_group(self, "ping")
        self.workers.cancel_group(self, "prepare")
        self.runner.start_turn(Outgoing(text) if isinstance(text, str) else text)

    async def _turn_ended(self, result: TurnResult | None, unsent: Outgoing | None = None) -> None:
        await self.transcript.end_turn()
        self.running = False
        if unsent is not None:
            # stopped before the message entered the session (its paste being taken in, the model starting)
            await self._give_back_waiting("cancelled", unsent)
            await self.transcript.show_notice("your message was not sent: it is back in the input")
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
        self.clocks.arm_slot_save()
        await self.send_waiting()
        if not self.running:
            # while the user reads, the next fold's summary may be written ahead; the next send cancels it
            self.run_worker(self._prepare_fold(), group="prepare", name="prepare a fold", exit_on_error=False)

    async def _prepare_fold(self) -> None:
        try:
            await self.agent.fold_requests.prepare_fold()
        except ModelError:
            return  # written again at the next pause, or at the trigger as any fold

    def _owes_reply(self) -> bool:
        """Is the last turn of the conversation a user's message, or a tool's answer to the model's call,
        with no reply after it? What sits in the context without asking for one does not count: the
        project instructions, the ledger, a fold's summary, a system note (the text protocol's, entered
        after the first message), a `!cmd` and its output, an attached file."""
        placed = (Kind.instructions, Kind.ledger, Kind.fold_summary)
        last = next(
            (m for m in reversed(self.session.messages) if not m.cut_off and m.kind not in placed and m.role != "system"),
            None,
        )
        if last is None or last.meta.get("shell"):
            return False
        return (last.role == "user" and last.kind is Kind.chat) or (last.role == "tool" and last.tool_call_id is not None)

    def action_cancel_reply(self) -> None:
        # what runs says "escape cancels": that comes first; with nothing running, escape goes back to the input
        cancelled = self.runner.cancel(self.running)
        if cancelled is None:
            self.prompt.focus()
        elif cancelled:
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
        worker = self.runner.current(self.running)
        if worker is not None and not worker.is_finished:
            self.action_cancel_reply()
            self.notify("interrupted; ctrl+c again quits", severity="information", timeout=QUIT_WINDOW)
        elif self.prompt.text:
            self.prompt.action_clear_input()
            self.notify("input cleared (ctrl+z brings it back); ctrl+c again quits", severity="information", timeout=QUIT_WINDOW)
        else:
            self.notify("ctrl+c again quits (the session is saved)", severity="information", timeout=QUIT_WINDOW)

    def action_retry(self) -> None:
        if self.busy:
            self.notify("a reply or a fold is running; escape cancels it", severity="warning")
        elif not self.retry_pending:
            self.notify("nothing to retry", severity="information")
        else:
            self.start_turn(None)

    # -- what the user sends while the agent is busy ------------------------------------------

    async def _queue_prompt(self, out: Outgoing) -> None:
        if self.runner.folding:
            when = "when the fold ends"
        elif self.runner.shell_running and not self.running:
            when = "when the command ends"
        elif self.transcript.fold_status is not None:
            when = "after the fold and the reply"
        else:
            when = "when the reply ends"
        self.runner.waiting.append(out)
        await self.transcript.show_queued(out.text, when)
        # said where the eyes are (the input), whatever part of the transcript is on screen
        n = len(self.runner.waiting)
        self.prompt.border_title = f"{n} message{'s' if n > 1 else ''} queued, sent {when} · escape gives back"

    async def send_waiting(self) -> None:
        """The agent is free again: what the user sent meanwhile goes now, as one message."""
        if self.busy:
            return
        out = self.runner.take_waiting()
        if out is None:
            return
        await self.transcript.drop_queued()
        self.prompt.border_title = None
        self.start_turn(out)

    async def _give_back_waiting(self, why: str, unsent: Outgoing | None = None) -> None:
        """What waited is not sent after a cancel or a failure: it goes back to the input, to send or edit,
        after the message the turn did not take in (`unsent`) and before what the box holds. A chip
        keeps its own paste when another carries the same label."""
        waiting, self.runner.waiting = self.runner.waiting, []
        if not waiting and unsent is None:
            return
        box = self.prompt
        pastes = dict(box.pastes)
        texts = [merge_chips(w.text, w.pastes, pastes) for w in ([unsent] if unsent else []) + waiting]
        box.value = "\n\n".join([*texts, box.value]).strip()
        box.pastes = pastes
        await self.transcript.drop_queued()
        box.border_title = None
        box.focus()
        if waiting:
            self.notify(f"{why}: what you sent meanwhile is back in the input", severity="warning")

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
            box.clear_sent(event.typed)
            if box.prompt_history.error:
                self.notify(box.prompt_history.error, severity="warning")
                box.prompt_history.error = None

    async def run_slash(self, text: str) -> bool:
        """Run a slash command from the action table; False (input kept) when it is unknown or malformed."""
        name, _, rest = text[1:].partition(" ")
        command = SLASH_BY_NAME.get(name)
        if command is None:
            self.notify(f"unknown command /{name}: /help lists the commands", severity="error")
            return False
        return await command.run(self, rest.strip())

    @on(PaletteSlash)
    def _palette_slash(self, event: PaletteSlash) -> None:
        """A slash command chosen in the palette: run it, or (if it needs an argument) start it in the input."""
        command = SLASH_BY_NAME[event.name]
        if command.needs_arg:
            box = self.prompt
            box.value = f"/{command.name} "
            box.focus()
            box.refresh_completion()
            return
        self.run_worker(self.run_slash(f"/{command.name}"), group="palette", exit_on_error=False)

    @on(PaletteAction)
    async def _palette_action(self, event: PaletteAction) -> None:
        await self.run_action(event.action)

    def fill_input(self, text: str) -> None:
        """Open the input on `text`, to edit and send (the ledger's edit)."""
        box = self.prompt
        box.value = text
        box.focus()

    def search_history(self) -> None:
        self.prompt.action_search_history()

    def _mentioned_files(self, text: str) -> list[str]:
        """The `@path` mentions that name a file in the workspace; one that looks like a path but
        is missing or leads out is said (others, like @someone, are just text)."""
        workspace = self.agent.workspace
        if workspace is None:
            return []
        files, problems = mentioned_files(text, Path(workspace))
        for line in problems:
            self.notify(line, severity="warning")
        return files

    def _run_shell(self, command: str) -> bool:
        if not command:
            self.notify("!cmd runs a shell command: type one after the !", severity="error")
            return False
        if self.runner.shell_running:
            self.notify("a command is running: wait, or press escape to stop it", severity="warning")
            return False
        if self.busy:
            self.notify("a reply or a fold is running: wait, or press escape to cancel it", severity="warning")
            return False
        self.runner.start_shell(self._shell(command), then=self.send_waiting)
        return True

    async def _shell(self, command: str) -> None:
        import asyncio

        try:
            await self.agent.tools.shell(command)
        except asyncio.CancelledError:
            self.notify(f"!{command} cancelled: its processes were killed", severity="warning")
            raise
        except Exception as exc:  # the command's failure is the user's to read, not a crash
            self.notify(f"!{command} failed: {exc}", severity="error")

    # -- keys: the ladder's, the sidebar, the notice, help ------------------------------------------

    def action_pin(self) -> None:
        self.ladder.pin()

    def action_unpin(self) -> None:
        self.ladder.unpin()

    def action_spill(self) -> None:
        self.ladder.spill()

    def action_fold(self) -> None:
        self.ladder.start_fold()

    async def action_inspect(self) -> None:
        await self.ladder.inspect(None)

    def action_accept(self) -> None:
        self.ladder.accept_statement()

    def action_supersede(self) -> None:
        self.ladder.supersede_statement()

    def action_edit_statement(self) -> None:
        self.ladder.edit_statement(None, None)

    async def action_show_ledger(self) -> None:
        await self.ladder.show_ledger()

    @on(SpillOpenRequested)
    async def _spill_open_requested(self, event: SpillOpenRequested) -> None:
        await self.ladder.open_spill(event.spill_id)

    @on(FoldInspectRequested)
    async def _fold_inspect_requested(self, event: FoldInspectRequested) -> None:
        await self.ladder.inspect(event.fold_no)

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

    # -- focus: the input, or navigation among the messages ------------------------------

    @property
    def mode(self) -> str:
        """ "input" while the input has the focus (or nothing has), else "navigation"."""
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
            box.border_title = "navigation: p u s f i c · a x e the ledger · esc or typing: back here"
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


def context_left(context_tokens: int, window: int) -> str:
    """The context figure the header always shows: "87% context left" (of the window)."""
    left = max(0.0, 1 - context_tokens / window) if window else 0.0
    return f"{left:.0%} context left"
