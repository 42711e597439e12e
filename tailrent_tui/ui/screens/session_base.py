"""What every part of the session screen shares: the agent, the settings, the widgets, busy, the header.

`SessionScreen` (`session.py`) is made of parts, one responsibility each, each
in its own module and each seeing the ones beneath it:

- `session_clocks.py` (`RentClocks`): the keep-warm ping, the cache countdown, the KV slot's idle save;
- `session_turn.py` (`TurnFeed`): the turn worker, the user's answer to a tool's approval, and the one
  queue on which the agent's typed reports (`ui/messages.py`) reach the widgets (`apply_update`);
- `session_ladder.py` (`LadderActions`): pin, unpin, spill, fold, unfold, inspect, the fold's preview,
  watch and recall, by key, slash command, palette or a panel;
- `session_commands.py` (`SessionCommands`): the other slash commands (model, export, copy, theme,
  history, retry, help), `!cmd`, and how a slash command finds its handler;
- `session.py` (`SessionScreen`): the composition, the input, focus and navigation.

This base holds the state they share, so each part reads it without reaching into another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.reactive import var
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from tailrent_tui.core.session import Session
from tailrent_tui.store.history import PromptHistory
from tailrent_tui.text import model_label
from tailrent_tui.ui.messages import Update
from tailrent_tui.ui.protocol import SessionAgent
from tailrent_tui.ui.widgets.input import PromptInput
from tailrent_tui.ui.widgets.notice import NoticeBar
from tailrent_tui.ui.widgets.sidebar import Sidebar
from tailrent_tui.ui.widgets.transcript import Transcript

if TYPE_CHECKING:
    from tailrent_tui.settings import Settings
    from tailrent_tui.ui.screens.session_turn import Outgoing


# The advice of the mock-model notice, as said inside the app
IN_APP_CONNECT = (
    "start Ollama (`ollama serve`) and type /model ollama:NAME, "
    "or /model openai:URL#MODEL for llama.cpp, vLLM or LM Studio"
)


class SessionBase(Screen[None]):
    """The session screen's shared state; `SessionScreen` is the class to use."""

    #: a turn is running; the Footer's keys follow it (and the next one)
    running: var[bool] = var(False, bindings=True)
    #: the last turn failed, or was cancelled before its reply: ctrl+r and /retry send it again
    retry_pending: var[bool] = var(False, bindings=True)

    # the widgets the parts feed, made in `SessionScreen.compose`
    sidebar: Sidebar
    transcript: Transcript
    prompt: PromptInput

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
        self._loading = False  # the model is loading (agent.preload): the header says so
        # TurnFeed's: what the agent reports, in order (the pump applies it), the workers, what the user sent meanwhile
        self._queue: asyncio.Queue[Update] = asyncio.Queue()
        self._turn_worker: Worker[None] | None = None
        self._fold_worker: Worker[None] | None = None
        #: a `!cmd` running: escape cancels it (its process group is killed)
        self._shell_worker: Worker[None] | None = None
        self._waiting: list[Outgoing] = []
        #: when ctrl+c was last pressed: a second one soon after quits (`action_interrupt`)
        self._quit_armed_at: float | None = None
        # RentClocks'
        self._pinging = False
        self._slot_timer: Timer | None = None
        # the sidebar's state chosen with ctrl+b against what the width says (reset when the width crosses NARROW_COLUMNS)
        self._sidebar_flipped = False
        self._narrow: bool | None = None

    @property
    def session(self) -> Session:
        return self.agent.session

    @property
    def busy(self) -> bool:
        """A turn or a fold by hand is running: messages wait, folds and shell commands are refused."""
        return self.running or self._fold_worker is not None

    def show_agent_notice(self) -> None:
        """The agent's notice (the mock model, a server that did not answer), its advice said the app's way."""
        from tailrent_tui.models.factory import CONNECT_HOW

        notice = self.agent.notice
        if notice:
            notice = notice.replace(CONNECT_HOW, IN_APP_CONNECT)
        self.notice_bar.show(notice)

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


def context_left(context_tokens: int, window: int) -> str:
    """The context figure the header always shows: "87% context left" (of the window)."""
    left = max(0.0, 1 - context_tokens / window) if window else 0.0
    return f"{left:.0%} context left"
