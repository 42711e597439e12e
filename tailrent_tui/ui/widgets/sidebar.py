"""The sidebar: the four ladder panels, each in a Collapsible titled Tail, Spills, Ledger, Folds.

The screen hands it the session, and by constructor the gauges it reads from
outside the session (`Gauges`); then each event, and each panel updates from
what the event changed. The Tail panel's figures are refreshed
once per batch of events, not once per event, so a burst stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Collapsible

from tailrent_tui.core.keepwarm import KeepWarmStatus
from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldRetired,
    InstructionsRead,
    Kind,
    MessageAdded,
    Note,
    Pinned,
    Spilled,
    StatementChanged,
    StatementsFound,
    Unfolded,
    Unpinned,
)
from tailrent_tui.core.rent import PriceSheet, conversation_usage
from tailrent_tui.core.session import Session
from tailrent_tui.ui.widgets.folds_panel import FoldsPanel
from tailrent_tui.ui.widgets.ledger_panel import LedgerPanel
from tailrent_tui.ui.widgets.spills_panel import SpillsPanel
from tailrent_tui.ui.widgets.tail_panel import TailPanel, tail_figures


def _no_tokens() -> int:
    return 0


def _unsaid() -> None:
    return None


@dataclass(frozen=True)
class Gauges:
    """What the Tail panel reads from outside the session, asked each time it redraws."""

    #: tokens spent by delegated sub-sessions
    delegate_tokens: Callable[[], int] = _no_tokens
    #: schema tokens of each MCP server's tools, counted apart
    mcp_tokens: Callable[[], dict[str, int]] = dict
    #: where folds put their summary and why (the agent's placement keeper); None: not said
    placement: Callable[[], tuple[str, str] | None] = _unsaid
    #: seconds the cache has left; None: unknown
    cache_left: Callable[[], float | None] = _unsaid
    #: the keep-warm rule's state now; None where nothing pings
    keep_warm: Callable[[], KeepWarmStatus | None] = _unsaid


class Sidebar(VerticalScroll, can_focus=False):
    """Tail, Spills, Ledger and Folds; ctrl+b shows and hides it."""

    DEFAULT_CSS = """
    Sidebar { width: 50; height: 1fr; background: $panel; border-left: vkey $primary 30%; padding: 0; }
    Sidebar.-hidden { display: none; }
    Sidebar > Collapsible { background: $panel; border-top: none; padding: 0 0 0 0; }
    Sidebar > Collapsible > Contents { padding: 0 1 0 1; }
    Sidebar CollapsibleTitle { color: $primary; text-style: bold; }
    """

    def __init__(
        self,
        session: Session,
        *,
        fold_trigger: float,
        fold_target: float,
        price_sheet: PriceSheet,
        clock: Callable[[], float],
        gauges: Gauges | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.session = session
        self.fold_trigger = fold_trigger
        self.fold_target = fold_target
        self.price_sheet = price_sheet
        self.clock = clock
        self.gauges = gauges = gauges or Gauges()
        self._dirty = {"tail", "spills", "ledger", "folds"}
        samples = [u.context_tokens for u in conversation_usage(session.usage)][-60:]
        self.tail = TailPanel(samples=samples, cache_left=gauges.cache_left, keep_warm=gauges.keep_warm, id="tail")
        self.spills = SpillsPanel(id="spills")
        self.ledger = LedgerPanel(id="ledger")
        self.folds = FoldsPanel(id="folds")

    def compose(self) -> ComposeResult:
        with Collapsible(title="Tail", collapsed=False, id="panel-tail"):
            yield self.tail
        with Collapsible(title="Spills", collapsed=False, id="panel-spills"):
            yield self.spills
        with Collapsible(title="Ledger", collapsed=False, id="panel-ledger"):
            yield self.ledger
        with Collapsible(title="Folds", collapsed=False, id="panel-folds"):
            yield self.folds

    def on_mount(self) -> None:
        self.tail.sample(self.session.context_tokens)
        self.flush()

    def note_event(self, event: Event) -> None:
        """Mark what an event changed; `flush` redraws it."""
        self._dirty.add("tail")
        if isinstance(event, MessageAdded):
            if event.message.kind == Kind.spill_pointer:
                self._dirty.add("spills")
            if event.message.pinned:
                self._dirty.add("ledger")
            self.tail.sample(self.session.context_tokens)
        elif isinstance(event, Spilled):
            self._dirty.add("spills")
            self.tail.sample(self.session.context_tokens)
        elif isinstance(event, InstructionsRead):
            self._dirty.add("ledger")
            self.tail.sample(self.session.context_tokens)
        elif isinstance(event, (Pinned, Unpinned, Note, StatementsFound, StatementChanged)):
            # a note may say that auto-pinning stopped at the pin budget
            self._dirty.add("ledger")
        elif isinstance(event, (Folded, Unfolded, FoldRetired)):
            # a fold carries statements into a ledger message; an unfold gives them back to their messages
            self._dirty.update(("folds", "ledger"))
            self.tail.sample(self.session.context_tokens)

    def flush(self) -> None:
        """Redraw the panels that events marked."""
        dirty, self._dirty = self._dirty, set()
        if "tail" in dirty:
            self.tail.refresh_figures(
                tail_figures(
                    self.session,
                    sheet=self.price_sheet,
                    fold_trigger=self.fold_trigger,
                    fold_target=self.fold_target,
                    delegate_tokens=self.gauges.delegate_tokens(),
                    mcp_tokens=self.gauges.mcp_tokens(),
                    placement=self.gauges.placement(),
                )
            )
        if "spills" in dirty:
            self.refresh_spills()
        if "ledger" in dirty:
            self.ledger.show(self.session)
        if "folds" in dirty:
            self.folds.show(self.session.folds, undone=set(self.session.unfolded))

    def refresh_window(self) -> None:
        """The window changed (learned from the server): the Tail panel's bar, trigger and target move with it."""
        self._dirty.add("tail")
        self.flush()

    def refresh_spills(self) -> None:
        self.spills.show(list(self.session.spills.values()), self.clock())

    def tick(self) -> None:
        """Once a second: the cache countdown."""
        self.tail.refresh_rent()
