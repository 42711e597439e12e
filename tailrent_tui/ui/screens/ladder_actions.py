"""The ladder's actions by hand: pin, unpin, spill, fold, unfold, inspect, open a spill, and the
ledger's: accept, supersede, edit a statement, list it.

The session screen composes one `LadderActions`; the same methods answer a key
(the screen's `action_pin`...), a slash command (`ui/slash.py`), the palette
and the panels (a spill or a fold clicked). A fold by hand runs in the turn
runner's worker (`start_fold`), never beside a turn; the fold itself happens in
the agent (`agent/ladder_driver.py`), and its preview comes back here
(`review_fold`) when `[fold] preview` asks for one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from textual.app import App
from textual.notifications import SeverityLevel
from textual.widget import Widget

from tailrent_tui.core.ledger import Statement
from tailrent_tui.core.messages import FoldSkipped, Kind, Message
from tailrent_tui.core.ports import ArchiveError
from tailrent_tui.core.session import Session, SessionError
from tailrent_tui.core.summarize import Review, Verdict
from tailrent_tui.store.ledger_report import StatementLookupError, find_statement, ledger_lines
from tailrent_tui.ui.protocol import SessionAgent
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.screens.fold_preview import FoldPreview
from tailrent_tui.ui.screens.spill_viewer import SpillViewer
from tailrent_tui.ui.screens.turn_runner import TurnRunner
from tailrent_tui.ui.widgets.folds_panel import FoldsPanel
from tailrent_tui.ui.widgets.ledger_panel import LedgerList, LedgerPanel
from tailrent_tui.ui.widgets.message import MessageView
from tailrent_tui.ui.widgets.transcript import Transcript

R = TypeVar("R")


class LadderHost(Protocol):
    """What the ladder's actions use of the session screen."""

    runner: TurnRunner
    transcript: Transcript
    focused_message_id: str | None

    @property
    def agent(self) -> SessionAgent: ...
    @property
    def session(self) -> Session: ...
    @property
    def app(self) -> App[Any]: ...
    @property
    def focused(self) -> Widget | None: ...
    @property
    def busy(self) -> bool: ...
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...
    def fill_input(self, text: str) -> None: ...
    async def send_waiting(self) -> None: ...


class LadderActions:
    """What the user does to the context by hand (the session screen composes one)."""

    def __init__(self, host: LadderHost) -> None:
        self.host = host

    # -- the actions ---------------------------------------------------------------

    def target_message(self, message_id: str | None = None, *, fallback_last: bool = False) -> Message | None:
        """The message an action applies to: the given id, the focused one, or (for commands) the last."""
        s = self.host.session
        if message_id is not None:
            if message_id in s:
                return s.get(message_id)
            self.host.notify(f"no message with id {message_id}", severity="error")
            return None
        focused = self.host.focused
        if isinstance(focused, MessageView) and focused.message_id is not None and focused.message_id in s:
            return s.get(focused.message_id)
        picked = self._ledger_pick()
        if picked is not None:
            what, ident = picked
            if what == "statement":
                st = s.statements[ident]
                ident = s.carrier.get(ident) or st.message_id
            if ident in s:
                return s.get(ident)
            self.host.notify("that statement's message is no longer in the context (a fold took it)", severity="warning")
            return None
        if self.host.focused_message_id is not None and self.host.focused_message_id in s:
            return s.get(self.host.focused_message_id)
        if fallback_last and s.messages:
            return s.messages[-1]
        self.host.notify("focus a message first (tab, then up/down)", severity="warning")
        return None

    def _carried_pick(self) -> Statement | None:
        """The Ledger panel's highlighted statement, when a ledger message carries it (p and u act on it alone)."""
        picked = self._ledger_pick()
        if picked is None or picked[0] != "statement":
            return None
        session = self.host.session
        holder = session.carrier.get(picked[1])
        if holder is None or holder not in session or session.get(holder).kind is not Kind.ledger:
            return None
        return session.statements[picked[1]]

    def _ask(self, call: Callable[[], R]) -> tuple[bool, R | None]:
        """Ask the agent for a change; a refusal (a pin in a span, a statement gone, a disk error) is
        said in one line: (False, None)."""
        try:
            return True, call()
        except (SessionError, OSError) as exc:
            self.host.notify(str(exc), severity="error")
            return False, None

    def pin_statement(self, st: Statement, pinned: bool) -> bool:
        no = self._number(st)
        done, changed = self._ask(lambda: self.host.agent.ladder.pin_statement(st.id, pinned))
        if not done:
            return False
        if changed is None:
            self.host.notify(f"#{no} is {'pinned' if pinned else 'unpinned'} already")
        elif pinned:
            self.host.notify(f"#{no} pinned: folds carry it verbatim")
        else:
            self.host.notify(f"#{no} unpinned: the next fold may summarize it; the rest of its ledger stays pinned")
        return True

    def pin(self, message_id: str | None = None, *, fallback_last: bool = False) -> bool:
        return self._set_pinned(True, message_id, fallback_last=fallback_last)

    def unpin(self, message_id: str | None = None, *, fallback_last: bool = False) -> bool:
        return self._set_pinned(False, message_id, fallback_last=fallback_last)

    def _set_pinned(self, pinned: bool, message_id: str | None, *, fallback_last: bool) -> bool:
        """Pin or unpin the Ledger panel's carried statement, else the message (the given id, the focused one)."""
        carried = self._carried_pick() if message_id is None else None
        if carried is not None:
            return self.pin_statement(carried, pinned)
        m = self.target_message(message_id, fallback_last=fallback_last)
        if m is None:
            return False
        if m.pinned == pinned:
            self.host.notify("already pinned" if pinned else "not pinned")
            return True
        return self._ask(lambda: (self.host.agent.ladder.pin if pinned else self.host.agent.ladder.unpin)(m.id))[0]

    # -- the ledger -----------------------------------------------------------------------

    def _ledger_pick(self) -> tuple[str, str] | None:
        """The Ledger panel's highlighted row, while the panel has the focus."""
        if isinstance(self.host.focused, LedgerList):
            panel = self.host.focused.parent
            if isinstance(panel, LedgerPanel):
                picked = panel.highlighted
                if picked is not None and (picked[0] == "message" or picked[1] in self.host.session.statements):
                    return picked
        return None

    def target_statement(self, ref: str | None, verb: str, fits: set[str]) -> Statement | None:
        """The statement an action applies to: named (number or id prefix), the Ledger panel's
        highlighted one, or the one the focused message holds (whose status is in `fits`)."""
        s = self.host.session
        if ref:
            try:
                return find_statement(s, ref)
            except StatementLookupError as exc:
                self.host.notify(str(exc), severity="error")
                return None
        picked = self._ledger_pick()
        if picked is not None and picked[0] == "statement":
            return s.statements[picked[1]]
        focused = self.host.focused
        message_id = focused.message_id if isinstance(focused, MessageView) else None
        if message_id is None:
            self.host.notify(f"select a statement to {verb} in the Ledger panel, or a message that holds one", severity="warning")
            return None
        numbers = {sid: i for i, sid in enumerate(s.statements, 1)}
        held = s.statements_held(message_id) + [i for i, st in s.statements.items() if st.message_id == message_id]
        candidates = [s.statements[i] for i in dict.fromkeys(held) if s.statements[i].status in fits]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            self.host.notify(f"this message holds no statement to {verb} (/ledger lists them)", severity="warning")
            return None
        listed = ", ".join(f"#{numbers[st.id]}" for st in candidates)
        self.host.notify(
            f"this message holds {len(candidates)} statements ({listed}): pick one in the Ledger panel, or /ledger {verb} N",
            severity="warning",
        )
        return None

    def _number(self, st: Statement) -> int:
        return list(self.host.session.statements).index(st.id) + 1

    def accept_statement(self, ref: str | None = None) -> bool:
        st = self.target_statement(ref, "accept", {"proposal"})
        if st is None:
            return False
        if st.status != "proposal":
            self.host.notify(f"#{self._number(st)} is {st.status}, not a proposal: nothing to accept")
            return True
        if not self._ask(lambda: self.host.agent.ladder.accept_statement(st.id))[0]:
            return False
        self.host.notify(f"#{self._number(st)} accepted: a current {st.kind}, kept verbatim from now on")
        return True

    def supersede_statement(self, ref: str | None = None) -> bool:
        st = self.target_statement(ref, "supersede", {"current", "proposal"})
        if st is None:
            return False
        if st.status == "superseded":
            self.host.notify(f"#{self._number(st)} is superseded already")
            return True
        if not self._ask(lambda: self.host.agent.ladder.supersede_statement(st.id))[0]:
            return False
        self.host.notify(f"#{self._number(st)} superseded: it leaves the context at the next fold")
        return True

    def edit_statement(self, ref: str | None, text: str | None) -> bool:
        """With a text, apply it; without, open the input on `/ledger edit N <its text>` (enter applies)."""
        st = self.target_statement(ref, "edit", {"current", "proposal"})
        if st is None:
            return False
        no = self._number(st)
        if text is None:
            self.host.fill_input(f"/ledger edit {no} {st.text}")
            return True
        if not self._ask(lambda: self.host.agent.ladder.edit_statement(st.id, text))[0]:
            return False
        self.host.notify(f"#{no} edited: the context shows your wording")
        return True

    async def show_ledger(self) -> None:
        await self.host.transcript.show_listing("\n".join(ledger_lines(self.host.session)))

    def spill(self, message_id: str | None = None, *, fallback_last: bool = False) -> bool:
        m = self.target_message(message_id, fallback_last=fallback_last)
        if m is None:
            return False
        return self._ask(lambda: self.host.agent.ladder.spill(m.id))[0]

    def start_fold(self, span_ids: list[str] | None = None) -> bool:
        """Fold by hand in a worker, unless the agent is busy: two plans must never edit the session at once."""
        if self.host.busy:
            self.host.notify("a reply or a fold is running: fold when it ends, or press escape to cancel it", severity="warning")
            return False
        self.host.runner.start_fold(self.fold(span_ids), then=self.host.send_waiting)
        return True

    async def fold(self, span_ids: list[str] | None = None) -> None:
        """Fold a span (the given ids, else the marked ones, else down to the fold target)."""
        if span_ids is None:
            span_ids = self.host.transcript.selected_ids or None
        try:
            result = await self.host.agent.ladder.fold(span_ids)
        except Exception as exc:  # SessionError (a pin in the span), FoldAborted (archive), a summarizer's failure
            self.host.notify(f"fold failed: {exc}", severity="error")
            return
        if isinstance(result, FoldSkipped):
            self.host.notify(result.reason, severity="warning")

    def fold_no_of(self, message_id: str) -> int | None:
        for f in self.host.session.folds:
            if f.summary.id == message_id:
                return f.fold_no
        return None

    async def inspect(self, fold_no: int | None) -> bool:
        folds = {f.fold_no: f for f in self.host.session.folds}
        if not folds:
            self.host.notify("no folds yet", severity="warning")
            return False
        if fold_no is None:
            focused = self.host.focused
            if isinstance(focused, MessageView) and focused.message is not None:
                fold_no = self.fold_no_of(focused.message.id)
            elif isinstance(focused, FoldsPanel) and focused.highlighted_option is not None:
                fold_no = int(focused.highlighted_option.id or 0)
        if fold_no is None:
            fold_no = max(folds)
        record = folds.get(fold_no)
        if record is None:
            self.host.notify(f"no fold #{fold_no}", severity="error")
            return False
        originals, error = None, None
        try:
            originals = await self.host.agent.stores.fold_originals_async(fold_no)
        except ArchiveError as exc:
            error = f"the originals cannot be shown: {exc}"

        def closed(result: str | None) -> None:
            if result == "unfold":
                self.unfold(fold_no)

        undo = self.undo_cost(fold_no) if fold_no not in self.host.session.unfolded else None
        inspector = FoldInspector(
            record,
            originals,
            error,
            undo=undo,
            statements=self.host.session.statements,
            retired=fold_no in self.host.session.retired,
        )
        self.host.app.push_screen(inspector, callback=closed)
        return True

    def unfold(self, fold_no: int) -> bool:
        """Undo a fold (`/unfold N`, `u` in the inspector); a one-line reason when it cannot be."""
        if self.host.busy:
            self.host.notify(
                "a reply or a fold is running: unfold when it ends, or press escape to cancel it", severity="warning"
            )
            return False
        cost = self.undo_cost(fold_no)
        try:
            event = self.host.agent.ladder.unfold(fold_no)
        except (SessionError, ArchiveError) as exc:
            self.host.notify(str(exc), severity="error")
            return False
        n = len(event.originals)
        self.host.notify(
            f"fold #{fold_no} undone: its {n} original message{'s' if n != 1 else ''} are back in the context"
            + (f"; {cost}" if cost else "")
        )
        return True

    def undo_cost(self, fold_no: int) -> str | None:
        """What undoing the fold costs the next request, in words (None when it cannot be said)."""
        try:
            tokens, seconds, cached = self.host.agent.fold_costs.unfold_cost(fold_no)
        except (SessionError, ArchiveError):
            return None
        text = f"the next request reads {tokens:,} tokens again" + (f" (~{seconds:.1f} s)" if seconds is not None else "")
        return text + (": the engine's prompt cache still holds the prompt before the fold" if cached else "")

    async def review_fold(self, review: Review) -> Verdict:
        """Show a fold before it applies (the agent's reviewer); the preview's answer goes back to the plan."""
        done: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        reread, seconds = self.host.agent.fold_costs.reread_after(review.record)

        def answered(verdict: Verdict | None) -> None:
            if not done.done():
                done.set_result(verdict if verdict is not None else Verdict(apply=False))

        self.host.app.push_screen(
            FoldPreview(review, reread=reread, seconds=seconds, statements=self.host.session.statements), callback=answered
        )
        try:
            return await done
        except asyncio.CancelledError:
            # the fold was cancelled under the preview (escape, quit): close it
            if isinstance(self.host.app.screen, FoldPreview):
                self.host.app.screen.dismiss(Verdict(apply=False))
            raise

    async def open_spill(self, spill_id: str) -> bool:
        spilled = self.host.session.spills.get(spill_id)
        if spilled is None:
            self.host.notify(f"no spill {spill_id}", severity="error")
            return False
        text, error = None, None
        try:
            text = await self.host.agent.stores.spill_text(spill_id)
        except (OSError, KeyError, ValueError) as exc:
            error = f"spill {spill_id} cannot be read: {exc}"
        self.host.app.push_screen(SpillViewer(spilled, text, error))
        return True
