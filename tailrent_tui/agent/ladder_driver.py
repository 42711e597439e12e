"""The agent's driver of the ladder: the policy's plans, run against the session with real I/O,
and rungs 1 and 2 applied to a tool's outcome before it enters the transcript.

The policy (core/policies) decides in pure code and yields what it needs: a
`Summarize(span)`, answered by the fold requests (fold_requests.py: a prepared
summary, or the summarizer's, a model's request awaited when the model writes
summaries), or a `Review`, answered by the app's fold preview. Every fold — the
policy's after a message or before a request, and the user's (`f`, `/fold`) —
runs through `run_plan`. The policy plans against the budget (budget.py: the
window less our counting drift, less the reply's room).

A tool's outcome (`admit_to_session`): rung 1 (the cap) already happened inside
the tool; the capped content is checked against the spill threshold (rung 2):
small results enter inline, big ones go to the spill store as a compact pointer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tailrent_tui.agent.budget import LadderBudget
from tailrent_tui.agent.events import TurnCallbacks
from tailrent_tui.agent.fold_requests import FoldRequests
from tailrent_tui.agent.kv_slots import SlotKeeper, restore_after_unfold
from tailrent_tui.agent.placement import PlacementKeeper
from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.agent.tools.base import ToolOutcome
from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldSkipped,
    Message,
    Pinned,
    Spilled,
    StatementChanged,
    Unfolded,
    Unpinned,
    WatchAdded,
)
from tailrent_tui.core.policies import Plan, PolicyContext
from tailrent_tui.core.ports import SpillStore
from tailrent_tui.core.rent import RentModel
from tailrent_tui.core.rungs.fold import unfold
from tailrent_tui.core.rungs.spill import admit_tool_result, spill_message
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import Review, Verdict
from tailrent_tui.core.tokens import TokenCounter


def tool_text(tool_name: str, outcome: ToolOutcome) -> str:
    """The text the model reads for an outcome (errors are marked as such)."""
    if outcome.is_error and not outcome.content.startswith("error:"):
        return f"error: {outcome.content}"
    return outcome.content


def admit_tool_output(
    tool_name: str,
    outcome: ToolOutcome,
    *,
    spill_store: SpillStore,
    counter: TokenCounter,
    threshold: int,
) -> str:
    """What the model would receive for this outcome after the ladder, where no session is
    open (`tailrent tool`): rung 2 as a session applies it, in a throwaway session."""
    scratch = Session(counter=counter)
    return admit_tool_result(scratch, tool_name, tool_text(tool_name, outcome), spill_store, threshold=threshold).content


def admit_to_session(
    session: Session,
    tool_name: str,
    outcome: ToolOutcome,
    *,
    spill_store: SpillStore,
    threshold: int,
    tool_call_id: str | None = None,
    preview_tail: bool = False,
) -> Message:
    """Add a tool's outcome to the session through rung 2."""
    m = admit_tool_result(
        session,
        tool_name,
        tool_text(tool_name, outcome),
        spill_store,
        threshold=threshold,
        tool_call_id=tool_call_id,
        preview_tail=preview_tail,
    )
    return m


class LadderDriver:
    """Runs the policy's plans (folds, spills, pins) and answers what they ask for."""

    def __init__(
        self,
        *,
        session: Session,
        budget: LadderBudget,
        requests: FoldRequests,
        spill_store: SpillStore,
        rent: RentModel | None,
        stores: SessionStores,
        slots: SlotKeeper | None = None,
        placement: PlacementKeeper | None = None,
        cold_resume: bool = False,
    ) -> None:
        """`budget`: the policy and the window it plans with; `requests`: who answers a plan's Summarize;
        `cold_resume`: a resume past the cache's life, whose first request rewrites the prefix (build found it)."""
        self.session = session
        self.budget = budget
        self.requests = requests
        self.spill_store = spill_store
        self.rent = rent
        self.stores = stores
        self.slots = slots
        self.placement = placement
        self.cold_resume = cold_resume
        #: shows a fold before it applies (the app's fold preview); unset: folds apply as planned
        self.on_review: Callable[[Review], Awaitable[Verdict]] | None = None
        #: requests the placement keeper has seen (`_observe_placement`)
        self._observed = len(session.usage)

    def _context(self) -> PolicyContext:
        """The policy's inputs, with the fold preview when the app shows folds before they apply."""
        return self.budget.policy_context(review=self.on_review is not None)

    # -- plans, driven --------------------------------------------------------------

    async def run_plan(self, plan: Plan) -> list[Event]:
        """The agent's driver of a policy plan: each Summarize is answered by the fold
        requests, the model's request awaited when the model writes summaries.

        Cancelling it (escape) closes the plan before its fold is applied.
        """
        on_review = self.on_review
        session = self.session
        # the transcript as it was (a copy of the list, in C): read only when the plan folded
        before = list(session.messages)
        try:
            request = next(plan)
            while True:
                if isinstance(request, Review):
                    verdict = await on_review(request) if on_review is not None else Verdict(apply=True)
                    request = plan.send(verdict)
                else:
                    request = plan.send(await self.requests.answer(request))
        except StopIteration as stop:
            self._placed(stop.value, before)
            return stop.value
        finally:
            plan.close()

    def _placed(self, events: list[Event], before: list[Message]) -> None:
        """Tell the placement keeper of each fold, with what an in-place fold would have kept cached
        (the head and the messages before the span): the next request is judged against it."""
        session = self.session
        moved = self.requests.fold_applied()
        keeper = self.placement
        if keeper is None or moved:
            return
        sent: list[Message] | None = None  # the messages sent before the plan: made at the first fold
        for ev in events:
            if isinstance(ev, Folded):
                sent = sent if sent is not None else [m for m in before if not m.cut_off]
                span = set(ev.fold.span_ids)
                first = next((i for i, m in enumerate(sent) if m.id in span), len(sent))
                keeper.folded(ev, session.head_tokens + sum(session.sent_tokens(m) for m in sent[:first]))

    async def _policy_step(self, plan: Plan) -> list[Event]:
        try:
            return await self.run_plan(plan)
        except Exception as exc:  # a failed fold must not lose the turn
            self.session.note(f"{self.budget.policy.name} policy: fold failed: {exc}", "error")
            return []

    async def after_add(self) -> list[Event]:
        """The policy's budget check after each message (and the placement's check of a request just recorded)."""
        self._observe_placement()
        return await self._policy_step(self.budget.policy.after_add(self.session, self._context()))

    async def add_message(
        self, role: Any, content: str, *, pinned: bool = False, at: float | None = None, **fields: Any
    ) -> Message:
        """Add a message and let the policy act on it: the path of every message a user, the demo or a trace adds."""
        m = self.session.add(role, content, pinned=pinned, at=at, **fields)
        await self.after_add()
        return m

    async def admit_tool_text(self, tool: str, content: str, *, at: float | None = None) -> Message:
        """A tool's text from a trace or the demo: rungs 1 and 2 as the policy applies them, then its check."""
        m = self.budget.policy.admit_tool(self.session, self._context(), tool, content, at=at)
        await self.after_add()
        return m

    def _observe_placement(self) -> None:
        keeper = self.placement
        usage = self.session.usage
        if keeper is None:
            return
        fresh, self._observed = usage[self._observed :], len(usage)
        for u in fresh:
            line = keeper.observe(u)
            if line:
                self.session.note(line, "warning")

    def _cache_expired(self) -> bool:
        if self.cold_resume:
            self.cold_resume = False  # build noted it already
            return True
        if self.rent is None:
            return False
        return self.rent.expired_at(self.session.clock())

    async def before_request(self, cb: TurnCallbacks | None = None) -> list[Event]:
        """The policy's step before each request: after a cache expiry it may fold at no
        extra cost, and it makes the request fit the window with room for the reply."""
        self.stores.refresh_instructions()
        await restore_after_unfold(self.slots, self.rent)
        cold = self.cold_resume
        expired = self._cache_expired()
        if expired and not cold:
            msg = "the cache expired while you were away: this request writes the prefix again"
            self.session.note(msg, "info")
            if cb is not None:
                cb.on_notice(msg, "info")
        return await self._policy_step(self.budget.policy.before_request(self.session, self._context(), expired=expired))

    # -- by hand: pins, statements, spills, watch words ----------------------------------

    def pin(self, message_id: str) -> Pinned | None:
        """Pin a message (rung 0); the decisions file follows the pins."""
        ev = self.session.pin(message_id)
        self.stores.write_decisions()
        return ev

    def unpin(self, message_id: str) -> Unpinned | None:
        ev = self.session.unpin(message_id)
        self.stores.write_decisions()
        return ev

    def accept_statement(self, statement_id: str) -> StatementChanged | None:
        """The user agrees with the model's statement (a proposal until then)."""
        return self.session.accept(statement_id)

    def supersede_statement(self, statement_id: str) -> StatementChanged | None:
        ev = self.session.supersede(statement_id)
        self.stores.write_decisions()  # its message may be unpinned
        return ev

    def pin_statement(self, statement_id: str, pinned: bool = True) -> StatementChanged | None:
        return self.session.pin_statement(statement_id, pinned)

    def edit_statement(self, statement_id: str, text: str) -> StatementChanged | None:
        ev = self.session.edit_statement(statement_id, text)
        self.stores.write_decisions()
        return ev

    def spill(self, message_id: str) -> Spilled:
        """Spill a message by hand (rung 2): its content to the spill store, a pointer in its place."""
        return spill_message(self.session, message_id, self.spill_store)

    def watch(self, word: str) -> WatchAdded | None:
        return self.session.add_watch(word)

    # -- folds by hand ----------------------------------------------------------------

    async def fold(self, span_ids: list[str] | None = None, *, trigger: str = "manual") -> Folded | FoldSkipped | None:
        """The user's fold (`f`, `/fold`): the policy's plan for it, driven like every other.

        A span with a pin, or an archive that cannot write, raises; a fold that
        would not shrink the context comes back as a FoldSkipped with the reason.
        """
        plan = self.budget.policy.fold_by_hand(self.session, self._context(), span_ids, trigger)
        events = await self.run_plan(plan)
        return next((e for e in reversed(events) if isinstance(e, (Folded, FoldSkipped))), None)

    def unfold(self, fold_no: int) -> Unfolded:
        """Undo fold `fold_no` (`/unfold N`, `u` in the inspector): its originals, read from
        the archive, back in its summary's place if they fit under the fold trigger.
        SessionError says why not; ArchiveError when its archive entry is damaged."""
        originals = self.stores.fold_originals(fold_no)
        event = unfold(self.session, fold_no, originals, limit=self._context().settings.trigger_tokens)
        # the engine's prompt cache may have let the prompt before the fold go: the slot saved
        # before the fold brings it back before the next request (slots.restore_after_unfold)
        keeper = self.slots
        if keeper is not None and keeper.state == "on":
            keeper.restore_pending = fold_no
        return event
