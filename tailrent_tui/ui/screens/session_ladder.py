"""The ladder's actions on the session screen: pin, unpin, spill, fold, unfold, inspect, watch, recall,
and the ledger's: accept, supersede, edit a statement, `/ledger`.

The same methods answer a key (`action_pin`...), a slash command
(`_slash_pin`...; the table is `ui/actions.py`), the palette and the panels
(a spill or a fold clicked). A fold by hand runs in a worker (`start_fold`),
never beside a turn; the fold itself happens in the agent
(`agent/ladder_driver.py`), and its preview comes back here (`review_fold`)
when `fold_preview` asks for one.
"""

from __future__ import annotations

import asyncio
import shlex

from tailrent_tui.core.ledger import Statement
from tailrent_tui.core.messages import FoldSkipped, Kind, Message
from tailrent_tui.core.ports import ArchiveError
from tailrent_tui.core.session import SessionError
from tailrent_tui.core.summarize import Review, Verdict
from tailrent_tui.store.ledger_report import StatementLookupError, find_statement, ledger_lines
from tailrent_tui.ui.events import FoldInspectRequested, SpillOpenRequested
from tailrent_tui.ui.screens.fold_inspector import FoldInspector
from tailrent_tui.ui.screens.fold_preview import FoldPreview
from tailrent_tui.ui.screens.recall import RecallScreen
from tailrent_tui.ui.screens.session_turn import TurnFeed
from tailrent_tui.ui.screens.spill_viewer import SpillViewer
from tailrent_tui.ui.widgets.folds_panel import FoldsPanel
from tailrent_tui.ui.widgets.ledger_panel import LedgerList, LedgerPanel
from tailrent_tui.ui.widgets.message import MessageView


def fold_number(text: str) -> int | None:
    """A fold number as typed (`3`, `#3`): ASCII digits only, never `²` or a 5,000-digit number
    (str.isdigit takes both, and int() then raised a ValueError that took the app down)."""
    digits = text.strip().removeprefix("#")
    return int(digits) if 0 < len(digits) <= 9 and digits.isascii() and digits.isdigit() else None

class LadderActions(TurnFeed):
    """What the user does to the context by hand (part of `SessionScreen`)."""

    # -- the actions ---------------------------------------------------------------

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
        picked = self._ledger_pick()
        if picked is not None:
            what, ident = picked
            if what == "statement":
                st = s.statements[ident]
                ident = s.carrier.get(ident) or st.message_id
            if ident in s:
                return s.get(ident)
            self.notify("that statement's message is no longer in the context (a fold took it)", severity="warning")
            return None
        if self.focused_message_id is not None and self.focused_message_id in s:
            return s.get(self.focused_message_id)
        if fallback_last and s.messages:
            return s.messages[-1]
        self.notify("focus a message first (tab, then up/down)", severity="warning")
        return None

    def _carried_pick(self) -> Statement | None:
        """The Ledger panel's highlighted statement, when a ledger message carries it (p and u act on it alone)."""
        picked = self._ledger_pick()
        if picked is None or picked[0] != "statement":
            return None
        holder = self.session.carrier.get(picked[1])
        if holder is None or holder not in self.session or self.session.get(holder).kind is not Kind.ledger:
            return None
        return self.session.statements[picked[1]]

    def pin_statement(self, st: Statement, pinned: bool) -> bool:
        no = self._number(st)
        try:
            changed = self.agent.pin_statement(st.id, pinned)
        except (SessionError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return False
        if changed is None:
            self.notify(f"#{no} is {'pinned' if pinned else 'unpinned'} already")
        elif pinned:
            self.notify(f"#{no} pinned: folds carry it verbatim")
        else:
            self.notify(f"#{no} unpinned: the next fold may summarize it; the rest of its ledger stays pinned")
        return True

    def pin(self, message_id: str | None = None, *, fallback_last: bool = False) -> bool:
        carried = self._carried_pick() if message_id is None else None
        if carried is not None:
            return self.pin_statement(carried, True)
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
        carried = self._carried_pick() if message_id is None else None
        if carried is not None:
            return self.pin_statement(carried, False)
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

    # -- the ledger -----------------------------------------------------------------------

    def _ledger_pick(self) -> tuple[str, str] | None:
        """The Ledger panel's highlighted row, while the panel has the focus."""
        if isinstance(self.focused, LedgerList):
            panel = self.focused.parent
            if isinstance(panel, LedgerPanel):
                picked = panel.highlighted
                if picked is not None and (picked[0] == "message" or picked[1] in self.session.statements):
                    return picked
        return None

    def target_statement(self, ref: str | None, verb: str, fits: set[str]) -> Statement | None:
        """The statement an action applies to: named (number or id prefix), the Ledger panel's
        highlighted one, or the one the focused message holds (whose status is in `fits`)."""
        s = self.session
        if ref:
            try:
                return find_statement(s, ref)
            except StatementLookupError as exc:
                self.notify(str(exc), severity="error")
                return None
        picked = self._ledger_pick()
        if picked is not None and picked[0] == "statement":
            return s.statements[picked[1]]
        focused = self.focused
        message_id = focused.message_id if isinstance(focused, MessageView) else None
        if message_id is None:
            self.notify(f"select a statement to {verb} in the Ledger panel, or a message that holds one", severity="warning")
            return None
        numbers = {sid: i for i, sid in enumerate(s.statements, 1)}
        held = s.statements_held(message_id) + [i for i, st in s.statements.items() if st.message_id == message_id]
        candidates = [s.statements[i] for i in dict.fromkeys(held) if s.statements[i].status in fits]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            self.notify(f"this message holds no statement to {verb} (/ledger lists them)", severity="warning")
            return None
        listed = ", ".join(f"#{numbers[st.id]}" for st in candidates)
        self.notify(
            f"this message holds {len(candidates)} statements ({listed}): pick one in the Ledger panel, or /ledger {verb} N",
            severity="warning",
        )
        return None

    def _number(self, st: Statement) -> int:
        return list(self.session.statements).index(st.id) + 1

    def accept_statement(self, ref: str | None = None) -> bool:
        st = self.target_statement(ref, "accept", {"proposal"})
        if st is None:
            return False
        if st.status != "proposal":
            self.notify(f"#{self._number(st)} is {st.status}, not a proposal: nothing to accept")
            return True
        try:
            self.agent.accept_statement(st.id)
        except (SessionError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return False
        self.notify(f"#{self._number(st)} accepted: a current {st.kind}, kept verbatim from now on")
        return True

    def supersede_statement(self, ref: str | None = None) -> bool:
        st = self.target_statement(ref, "supersede", {"current", "proposal"})
        if st is None:
            return False
        if st.status == "superseded":
            self.notify(f"#{self._number(st)} is superseded already")
            return True
        try:
            self.agent.supersede_statement(st.id)
        except (SessionError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return False
        self.notify(f"#{self._number(st)} superseded: it leaves the context at the next fold")
        return True

    def edit_statement(self, ref: str | None, text: str | None) -> bool:
        """With a text, apply it; without, open the input on `/ledger edit N <its text>` (enter applies)."""
        st = self.target_statement(ref, "edit", {"current", "proposal"})
        if st is None:
            return False
        no = self._number(st)
        if text is None:
            box = self.prompt
            box.value = f"/ledger edit {no} {st.text}"
            box.focus()
            return True
        try:
            self.agent.edit_statement(st.id, text)
        except (SessionError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return False
        self.notify(f"#{no} edited: the context shows your wording")
        return True

    async def show_ledger(self) -> None:
        await self.transcript.show_listing("\n".join(ledger_lines(self.session)))

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

    async def inspect(self, fold_no: int | None) -> bool:
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
            originals = await self.agent.fold_originals(fold_no)
        except ArchiveError as exc:
            error = f"the originals cannot be shown: {exc}"
        def closed(result: str | None) -> None:
            if result == "unfold":
                self.unfold(fold_no)

        undo = self.undo_cost(fold_no) if fold_no not in self.session.unfolded else None
        inspector = FoldInspector(
            record, originals, error, undo=undo, statements=self.session.statements,
            retired=fold_no in self.session.retired,
        )
        self.app.push_screen(inspector, callback=closed)
        return True

    def unfold(self, fold_no: int) -> bool:
        """Undo a fold (`/unfold N`, `u` in the inspector); a one-line reason when it cannot be."""
        if self.busy:
            self.notify("a reply or a fold is running: unfold when it ends, or press escape to cancel it", severity="warning")
            return False
        cost = self.undo_cost(fold_no)
        try:
            event = self.agent.unfold(fold_no)
        except (SessionError, ArchiveError) as exc:
            self.notify(str(exc), severity="error")
            return False
        n = len(event.originals)
        self.notify(
            f"fold #{fold_no} undone: its {n} original message{'s' if n != 1 else ''} are back in the context"
            + (f"; {cost}" if cost else "")
        )
        return True

    def undo_cost(self, fold_no: int) -> str | None:
        """What undoing the fold costs the next request, in words (None when it cannot be said)."""
        try:
            tokens, seconds, cached = self.agent.unfold_cost(fold_no)
        except (SessionError, ArchiveError):
            return None
        text = f"the next request reads {tokens:,} tokens again" + (f" (~{seconds:.1f} s)" if seconds is not None else "")
        return text + (": the engine's prompt cache still holds the prompt before the fold" if cached else "")

    async def review_fold(self, review: Review) -> Verdict:
        """Show a fold before it applies (the agent's reviewer); the preview's answer goes back to the plan."""
        done: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        reread, seconds = self.agent.reread_after(review.record)

        def answered(verdict: Verdict | None) -> None:
            if not done.done():
                done.set_result(verdict if verdict is not None else Verdict(apply=False))

        self.app.push_screen(
            FoldPreview(review, reread=reread, seconds=seconds, statements=self.session.statements), callback=answered
        )
        try:
            return await done
        except asyncio.CancelledError:
            # the fold was cancelled under the preview (escape, quit): close it
            if isinstance(self.app.screen, FoldPreview):
                self.app.screen.dismiss(Verdict(apply=False))
            raise

    async def open_spill(self, spill_id: str) -> bool:
        spilled = self.session.spills.get(spill_id)
        if spilled is None:
            self.notify(f"no spill {spill_id}", severity="error")
            return False
        text, error = None, None
        try:
            text = await self.agent.spill_text(spill_id)
        except (OSError, KeyError, ValueError) as exc:
            error = f"spill {spill_id} cannot be read: {exc}"
        self.app.push_screen(SpillViewer(spilled, text, error))
        return True

    # -- keys and the palette (`action_<id>`), slash commands (`_slash_<name>`), the panels --------------

    def action_pin(self) -> None:
        self.pin()

    def action_unpin(self) -> None:
        self.unpin()

    def action_spill(self) -> None:
        self.spill()

    def action_fold(self) -> None:
        self.start_fold()

    async def action_inspect(self) -> None:
        await self.inspect(None)

    def action_accept(self) -> None:
        self.accept_statement()

    def action_supersede(self) -> None:
        self.supersede_statement()

    def action_edit_statement(self) -> None:
        self.edit_statement(None, None)

    async def action_show_ledger(self) -> None:
        await self.show_ledger()

    async def _slash_ledger(self, rest: str) -> bool:
        verb, _, args = rest.strip().partition(" ")
        args = args.strip()
        usage = (
            "/ledger lists it; /ledger accept N, /ledger supersede N, /ledger pin N, /ledger unpin N, "
            "/ledger edit N TEXT (N: its number or id)"
        )
        if not verb:
            await self.show_ledger()
            return True
        if verb not in ("accept", "supersede", "edit", "pin", "unpin"):
            self.notify(f"/ledger {verb}: unknown; {usage}", severity="error")
            return False
        ref, _, text = args.partition(" ")
        if not ref:
            self.notify(f"/ledger {verb} needs a statement: {usage}", severity="error")
            return False
        if verb == "accept":
            return self.accept_statement(ref)
        if verb == "supersede":
            return self.supersede_statement(ref)
        if verb in ("pin", "unpin"):
            st = self.target_statement(ref, verb, {"current", "proposal"})
            return st is not None and self.pin_statement(st, verb == "pin")
        if not text.strip():
            # the input opens on the statement's text, to edit there (kept: not accepted)
            self.edit_statement(ref, None)
            return False
        return self.edit_statement(ref, text.strip())

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
            fold_no = fold_number(rest)
            if fold_no is None:
                self.notify("/inspect takes a fold number (the Folds panel lists them)", severity="error")
                return False
            return await self.inspect(fold_no)
        return await self.inspect(None)

    async def _slash_unfold(self, rest: str) -> bool:
        fold_no = fold_number(rest)
        if fold_no is None:
            self.notify("/unfold takes a fold number (the Folds panel lists them)", severity="error")
            return False
        return self.unfold(fold_no)

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

    async def on_spill_open_requested(self, event: SpillOpenRequested) -> None:
        await self.open_spill(event.spill_id)

    async def on_fold_inspect_requested(self, event: FoldInspectRequested) -> None:
        await self.inspect(event.fold_no)
