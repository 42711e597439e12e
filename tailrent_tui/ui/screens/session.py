"""SessionScreen: the transcript on the left, the ladder panels on the right, the input below.

The screen renders the session's events and turns keys, palette commands and
slash commands (one table: `ui/actions.py`) into calls on the agent (typed by
`ui/protocol.py`). It is made of parts, one module each (`session_base.py` says
which): this one composes the widgets, starts the agent, and routes the input
and the focus. Where things happen:

- a reply, an event or a fold's progress reaches the screen in `TurnFeed.apply_update` (`session_turn.py`);
- a tool is put to the user for approval in `TurnFeed.approve` (`session_turn.py`);
- a fold by hand starts in `LadderActions.start_fold` (`session_ladder.py`), with every other ladder action;
- the other slash commands are `SessionCommands`' (`session_commands.py`), the clocks `RentClocks`' (`session_clocks.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message as TextualMessage
from textual.widgets import Footer, Header

from tailrent_tui.core.rent import get_price_sheet
from tailrent_tui.ui.actions import BINDINGS, NAVIGATION_ACTIONS
from tailrent_tui.ui.commands import LadderCommands
from tailrent_tui.ui.completion import Sources, mentions
from tailrent_tui.ui.events import MessageFocused, PromptSubmitted
from tailrent_tui.ui.messages import AgentNotice
from tailrent_tui.ui.screens.session_clocks import RentClocks
from tailrent_tui.ui.screens.session_commands import SessionCommands
from tailrent_tui.ui.screens.session_ladder import LadderActions
from tailrent_tui.ui.screens.session_turn import Outgoing, TurnFeed
from tailrent_tui.ui.widgets.completion_menu import CompletionMenu
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.sidebar import Sidebar
from tailrent_tui.ui.widgets.transcript import Transcript

# Under this many columns the sidebar hides itself (ctrl+b still shows it).
NARROW_COLUMNS = 100


class SessionScreen(SessionCommands, LadderActions, TurnFeed, RentClocks):
    """One session: its transcript, its ladder panels, the input, and every ladder action."""

    # absolute, so subclasses in other modules find it too
    CSS_PATH = str(Path(__file__).with_name("session.tcss"))
    COMMANDS = {LadderCommands}
    # the focus starts in the input (as `focus_at_start` says), not on the first message
    AUTO_FOCUS = "#input"
    BINDINGS: ClassVar[list[BindingType]] = list(BINDINGS)

    class Ready(TextualMessage):
        """The screen is mounted, its notice said: the app may add its own (journal health, warnings)."""

    # -- layout ----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # the screen keeps its own references to the widgets the pump and the actions feed
        rent = self.agent.rent
        self.sidebar = Sidebar(
            self.session,
            fold_trigger=self.settings.fold.trigger,
            fold_target=self.settings.fold.target,
            # the rent model's own sheet (a user's prices.toml included); the demo has no rent model
            price_sheet=rent.sheet if rent is not None else get_price_sheet(self.settings.price_sheet),
            clock=self.clock,
            id="sidebar",
        )
        self.sidebar.delegate_tokens = lambda: self.agent.sub_tokens
        keeper = self.agent.placement
        if keeper is not None:
            self.sidebar.placement = lambda: keeper.state.panel_lines() if keeper.detected else None
        self.transcript = Transcript(
            self.session, clock=self.clock, id="transcript"
        )
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
        self.agent.on_prepared = self.sidebar.folds.mark_prepared
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
        self.call_after_refresh(self.start_mcp)

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

    def focus_at_start(self) -> None:
        """Where the focus starts: the input box, to type at once."""
        self.prompt.focus()

    def on_unmount(self) -> None:
        if self._on_session_event in self.session.listeners:
            self.session.listeners.remove(self._on_session_event)
        self.agent.on_summary = None
        self.agent.on_review = None
        self.agent.on_prepared = None

    # -- the sidebar, the notice -----------------------------------------------------

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
