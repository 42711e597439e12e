"""TailrentApp: the themes, the keymap, the journal's health and quit, around one session screen.

Everything about the session itself (the transcript, the ladder panels, the
input, the ladder's actions, the turn) is `SessionScreen`'s
(`ui/screens/session.py`); its keys, slash commands and palette entries come
from one table (`ui/actions.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import App
from textual.binding import BindingType
from textual.notifications import SeverityLevel
from textual.theme import Theme
from textual.timer import Timer

from tailrent_tui.core.session import Session
from tailrent_tui.store.history import PromptHistory, history_path
from tailrent_tui.store.journal import AsyncJournalWriter
from tailrent_tui.ui.protocol import SessionAgent
from tailrent_tui.ui.screens.session import SessionScreen
from tailrent_tui.ui.terminal_bytes import install as decode_keys_with_replacement
from tailrent_tui.ui.themes import CUSTOM_VARIABLES, load_themes, packaged_theme_dirs
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.notice import NoticeBar
from tailrent_tui.ui.widgets.sidebar import Sidebar
from tailrent_tui.ui.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tailrent_tui.settings import Settings

DEFAULT_THEME = "tailrent-dark"

# a byte typed or pasted that is not UTF-8 must not take the app down (ui/terminal_bytes.py)
decode_keys_with_replacement()


class TailrentApp(App[None]):
    """The tailrent terminal UI."""

    TITLE = "tailrent"
    # absolute, so subclasses in other modules (the demo, benchmarks) find it too
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    # the session's keys are SessionScreen's (ui/actions.py); a subclass may add its own here (the demo)
    BINDINGS: ClassVar[list[BindingType]] = []

    def __init__(
        self,
        agent: SessionAgent,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        theme_dirs: Sequence[Traversable] | None = None,
        remember_theme: Callable[[str, Any], None] | None = None,
        history: PromptHistory | None = None,
        load_warnings: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.agent = agent
        self.settings = settings
        #: what loading the settings warned of (old flat keys): said once at start
        self.load_warnings = list(load_warnings)
        self.clock = clock
        self.prompt_history = history if history is not None else self._open_history()
        self._remember_theme = remember_theme
        self.theme_errors: list[str] = []
        self._journal_retry: Timer | None = None
        self._register_themes(theme_dirs)
        if settings.keymap:
            self.set_keymap(dict(settings.keymap))
        self.session_screen = SessionScreen(agent, settings, clock=clock, history=self.prompt_history)
        #: "new" when /new or /clear ended the app: `tailrent` then opens a new session (ui/launch.py)
        self.next_session: str | None = None

    def get_default_screen(self) -> SessionScreen:
        return self.session_screen

    async def _ready(self) -> None:
        # Textual's hook before the app takes its first message: wait until the session screen has
        # composed and mounted, so a pilot (a test, a snapshot's run_before) finds its widgets at once
        await super()._ready()
        await self.session_screen._mounted_event.wait()

    # the session screen's parts, as tests and benchmarks reach them

    @property
    def session(self) -> Session:
        return self.agent.session

    @property
    def transcript(self) -> Transcript:
        return self.session_screen.transcript

    @property
    def sidebar(self) -> Sidebar:
        return self.session_screen.sidebar

    @property
    def prompt(self) -> PromptInput:
        return self.session_screen.prompt

    @property
    def notice_bar(self) -> NoticeBar:
        return self.session_screen.notice_bar

    @property
    def running(self) -> bool:
        """A turn is running."""
        return self.session_screen.running

    @property
    def busy(self) -> bool:
        """A turn or a fold by hand is running."""
        return self.session_screen.busy

    @property
    def mode(self) -> str:
        """ "input" or "navigation" (see SessionScreen.mode)."""
        return self.session_screen.mode

    # the ladder actions the snapshot tests call directly

    async def inspect(self, fold_no: int | None) -> bool:
        return await self.session_screen.ladder.inspect(fold_no)

    async def open_spill(self, spill_id: str) -> bool:
        return await self.session_screen.ladder.open_spill(spill_id)

    def start_fold(self, span_ids: list[str] | None = None) -> bool:
        return self.session_screen.ladder.start_fold(span_ids)

    def _open_history(self) -> PromptHistory:
        """The workspace's input history, kept in the data dir when the session is (else in memory)."""
        workspace = self.agent.workspace
        if workspace is None or (self.settings.data_dir is None and self.agent.journal is None):
            return PromptHistory(None)
        from tailrent_tui.store.paths import resolve_data_dir

        return PromptHistory(history_path(resolve_data_dir(self.settings.data_dir), workspace), workspace=Path(workspace))

    # -- themes ----------------------------------------------------------------

    def get_css_variables(self) -> dict[str, str]:
        # a theme that does not set the ladder's colors (Textual's own themes)
        # gets them from its own palette, so every theme works
        variables = super().get_css_variables()
        for name, source in CUSTOM_VARIABLES.items():
            if name not in variables:
                variables[name] = variables[source]
        self.theme_variables = variables
        return variables

    def _register_themes(self, theme_dirs: Sequence[Traversable] | None) -> None:
        if theme_dirs is None:
            from tailrent_tui.settings import config_dir

            theme_dirs = [*packaged_theme_dirs(), config_dir() / "themes"]
        themes, self.theme_errors = load_themes(theme_dirs)
        for theme in themes:
            self.register_theme(theme)
        wanted = self.settings.theme
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            self.theme_errors.append(f"unknown theme {wanted!r}: using {DEFAULT_THEME}")
            self.theme = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"

    def _theme_changed(self, theme: Theme) -> None:
        if theme.name == self.settings.theme:
            return
        self.settings.theme = theme.name
        remember = self._remember_theme
        if remember is None:
            from tailrent_tui.settings import save_user_choice

            remember = save_user_choice
        try:
            remember("theme", theme.name)
        except OSError as exc:
            self.notify(f"could not remember the theme: {exc}", severity="warning")

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    def on_session_screen_ready(self, event: SessionScreen.Ready) -> None:
        """The screen has said its own notice: the themes, the settings and the journal say theirs."""
        for error in self.theme_errors:
            self.notify(error, severity="warning", timeout=8)
        for warning in self.settings_warnings():
            self.notify(warning, title="settings", severity="warning", timeout=20)
        journal = self.agent.journal
        if isinstance(journal, AsyncJournalWriter):
            journal.on_status = self._journal_status
            if journal.last_error is not None:
                # a write that failed while the agent was built, before anyone could be told
                self._journal_status(journal)

    # -- the journal's health ---------------------------------------------------------

    def _journal_status(self, writer: AsyncJournalWriter) -> None:
        """The journal could not write (disk full, read-only) or has caught up again.

        Unsaved events stay in memory, in order; they are retried every few
        seconds and on every new event, and nothing already saved is touched.
        """
        error = writer.last_error
        if error is not None:
            reason = getattr(error, "strerror", None) or str(error)
            self.notice_bar.show(
                f"The session is not being saved: {reason} ({writer.path}). "
                f"{writer.pending} change(s) are kept in memory and retried every 5 s; "
                "free some space or fix the permissions — nothing is lost while tailrent runs.",
                "error",
            )
            if self._journal_retry is None:
                self._journal_retry = self.set_interval(5.0, self._retry_journal, name="journal retry")
            return
        if self._journal_retry is not None:
            self._journal_retry.stop()
            self._journal_retry = None
        self.notice_bar.show(None)
        self.notify("the session is saved again: every pending change is written")

    def _retry_journal(self) -> None:
        journal = self.agent.journal
        if isinstance(journal, AsyncJournalWriter) and journal.pending:
            self.run_worker(journal.retry(), group="journal", exit_on_error=False)

    # -- the keymap, quit -----------------------------------------------------------

    def settings_warnings(self) -> list[str]:
        """Old flat keys, misspelled TAILRENT_* variables, and keymap ids or keys that clash: said once at start."""
        from tailrent_tui.settings import env_warnings
        from tailrent_tui.ui.keymap import keymap_warnings

        return [*self.load_warnings, *env_warnings(), *keymap_warnings(self.settings.keymap)]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast shows its text as written, never as markup: the settings' groups (`[slots] dir`),
        a path or a server's error would lose their brackets, or fail to show."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def farewell(self) -> str | None:
        """What the terminal shows after the app: the session's id and how to come back to it."""
        if self.agent.journal is None or not self.session.id or self.session.blank:
            return None
        return f"session {self.session.id}\nresume it with: tailrent --resume {self.session.id}"

    def run(self, *args: Any, **kwargs: Any) -> Any:
        result = super().run(*args, **kwargs)
        if not self.return_code and (text := self.farewell()):
            print(text)
        return result
