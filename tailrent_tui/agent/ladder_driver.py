"""The agent's driver of the ladder: the policy's plans, run against the session with real I/O,
and rungs 1 and 2 applied to a tool's outcome before it enters the transcript.

The policy (core/policies) decides in pure code and yields what it needs: a
`Summarize(span)`, answered here by the summarizer (a model's request awaited
when the model writes summaries), or a `Review`, answered by the app's fold
preview. Every fold — the policy's after a message or before a request, and
the user's (`f`, `/fold`) — runs through `run_plan`. The budget arithmetic the
policy is handed (`policy_context`: the window less our counting drift, less
the reply's room) lives here too.

A tool's outcome (`admit_to_session`): rung 1 (the cap) already happened inside
the tool; the capped content is checked against the spill threshold (rung 2):
small results enter inline, big ones go to the spill store as a compact pointer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tailrent_tui.agent.events import SummaryEnded, SummaryProgress, SummaryStarted, TurnCallbacks, noop
from tailrent_tui.agent.fold_requests import FoldRequests, PreparedFold
from tailrent_tui.agent.kv_slots import SlotKeeper, restore_after_unfold
from tailrent_tui.agent.meter import UsageMeter
from tailrent_tui.agent.placement import PlacementKeeper
from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.agent.tools.base import ToolOutcome
from tailrent_tui.core.messages import (
    Event,
    Folded,
    FoldRecord,
    FoldSkipped,
    Message,
    Pinned,
    Spilled,
    StatementChanged,
    Unfolded,
    Unpinned,
    WatchAdded,
)
from tailrent_tui.core.policies import Plan, Policy, PolicyContext, PolicySettings, get_policy
from tailrent_tui.core.ports import FoldArchive, SpillStore
from tailrent_tui.core.rent import RentModel, context_items
from tailrent_tui.core.rungs.fold import unfold
from tailrent_tui.core.rungs.spill import admit_tool_result, spill_message
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import Review, Summarize, Summarizer, Summary, Verdict
from tailrent_tui.core.tokens import TokenCounter
from tailrent_tui.models.errors import ContextOverflow
from tailrent_tui.models.summarizer import ModelSummarizer
from tailrent_tui.settings import Settings


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


#: after the server refuses a request as too large, the ladder budgets with this much less of the window
OVERFLOW_SHRINK = 0.85


class LadderDriver:
    """Runs the policy's plans (folds, spills, pins) and answers what they ask for."""

    def __init__(
        self,
        *,
        session: Session,
        settings: Settings,
        spill_store: SpillStore,
        archive: FoldArchive,
        summarizer: Summarizer | ModelSummarizer,
        rent: RentModel | None,
        meter: UsageMeter,
        stores: SessionStores,
        slots: SlotKeeper | None = None,
        placement: PlacementKeeper | None = None,
        policy_settings: PolicySettings | None = None,
        offered_tools: Callable[[], list[dict[str, Any]]] | None = None,
        request_options: Callable[[], dict[str, Any]] | None = None,
        cold_resume: bool = False,
        is_sub: bool = False,
    ) -> None:
        """`policy_settings`: the bench fixes every policy setting (the app derives them from `settings`);
        `offered_tools`, `request_options`: what a turn's request sends (a summary request sends the same);
        `cold_resume`: a resume past the cache's life, whose first request rewrites the prefix (build found it)."""
        self.session = session
        self.settings = settings
        self.spill_store = spill_store
        self.archive = archive
        self.summarizer = summarizer
        self.rent = rent
        self.meter = meter
        self.stores = stores
        self.slots = slots
        self.placement = placement
        self.policy_settings = policy_settings
        self.offered_tools = offered_tools
        self.request_options = request_options
        self.cold_resume = cold_resume
        self.is_sub = is_sub
        #: told when a fold's summary is asked for and when it is in: folds run inside
        #: a turn and by hand, so this belongs to the ladder, not to one turn's callbacks
        self.on_summary: Callable[[SummaryProgress], None] | None = None
        #: told when a fold's summary is written ahead (`prepare_fold`), and when it is used or dropped (None)
        self.on_prepared: Callable[[PreparedFold | None], None] | None = None
        #: shows a fold before it applies (the app's fold preview); unset: folds apply as planned
        self.on_review: Callable[[Review], Awaitable[Verdict]] | None = None
        self._policy: Policy | None = None
        self.window_scale = 1.0
        #: requests the placement keeper has seen (`_observe_placement`)
        self._observed = len(session.usage)
        self.requests = FoldRequests(self)

    @property
    def policy(self) -> Policy:
        if self._policy is None or self._policy.name != self.settings.policy:
            self._policy = get_policy(self.settings.policy)
        return self._policy

    # -- the budget the policy is handed -----------------------------------------

    def token_drift(self) -> float:
        """Tokens the server counts for each one we predict, from its last report (1 to 1.5).

        Our tokenizer is not always the server's, and the chat template adds its own
        tokens: a context that fits by our count may not by the server's.
        """
        for u in reversed(self.session.usage):
            if u.prompt_tokens and u.context_tokens and u.sub_session is None:
                return min(1.5, max(1.0, u.prompt_tokens / u.context_tokens))
        return 1.0

    def shrink_window(self) -> None:
        """The server counted more than we did and refused a request: budget with a smaller window from now on."""
        self.window_scale *= OVERFLOW_SHRINK

    def budget_window(self) -> int:
        """The window a request must fit by our count: the server's, less the drift of our
        count from its, less what the server refused before."""
        return max(256, int(self.session.window * self.window_scale / self.token_drift()))

    def reply_cap(self) -> int:
        """Tokens a reply may take: the setting, else an eighth of the window."""
        return self.settings.max_reply_tokens or max(256, self.session.window // 8)

    def room(self) -> int:
        """Tokens the context can still take before the fold trigger, the reply's room kept."""
        trigger = int(self.budget_window() * self.settings.fold.trigger)
        return max(0, trigger - self.reply_cap() - self.session.context_tokens)

    def policy_context(self) -> PolicyContext:
        window = self.session.window
        keeper = self.placement
        placed: dict[str, Any] = (
            {"fold_placement": keeper.state.placement, "fold_turn_ends": keeper.state.turn_ends}
            if keeper is not None and keeper.detected
            else {}
        )
        if self.policy_settings is not None:
            settings = self.policy_settings.model_copy(update={"window": window, **placed})
        else:
            settings = PolicySettings(
                window=window,
                fold_trigger=self.settings.fold.trigger,
                fold_target=self.settings.fold.target,
                resume_fold_target=self.settings.fold.resume_target,
                spill_threshold=self.settings.tools.spill_threshold,
                guard=self.settings.fold.guard,
                # room for the reply, and for what the server counts beyond our count
                reply_reserve=self.reply_cap() + window - self.budget_window(),
                fold_preview=self.settings.fold.preview if self.on_review is not None else "never",
                **placed,
            )
        return PolicyContext(spill_store=self.spill_store, archive=self.archive, settings=settings)

    def check_fits(self) -> None:
        """A request over the window is never sent: the server would refuse it, or cut it silently."""
        s = self.session
        reserve = self.reply_cap()
        window = self.budget_window() if self.policy_settings is None else s.window
        if s.context_tokens + reserve <= window:
            return
        raise ContextOverflow(
            f"not sent: the context ({s.context_tokens:,} tokens) and the reply's {reserve:,} do not fit "
            f"the {window:,}-token window"
            + (f" (the server's {s.window:,}, less our counting drift)" if window < s.window else ""),
            "unpin what no longer matters (u), spill or fold by hand (s, f), or lower max_reply_tokens",
        )

    # -- plans, driven --------------------------------------------------------------

    async def run_plan(self, plan: Plan) -> list[Event]:
        """The agent's driver of a policy plan: each Summarize is answered by the
        summarizer, the model's request awaited when the model writes summaries.

        Cancelling it (escape) closes the plan before its fold is applied.
        """
        on_review = self.on_review
        session = self.session
        before = [m for m in session.messages if not m.cut_off]
        try:
            request = next(plan)
            while True:
                if isinstance(request, Review):
                    verdict = await on_review(request) if on_review is not None else Verdict(apply=True)
                    request = plan.send(verdict)
                else:
                    ready = self.prepared_summary(request)
                    request = plan.send(ready if ready is not None else await self.watched_summary(request))
        except StopIteration as stop:
            self._placed(stop.value, before)
            return stop.value
        finally:
            plan.close()

    def _placed(self, events: list[Event], before: list[Message]) -> None:
        """Tell the placement keeper of each fold, with what an in-place fold would have kept cached
        (the head and the messages before the span): the next request is judged against it."""
        session = self.session
        # the last fold's summary request's instruction and answer are now its summary, in the cache
        self.requests.rename_folded()
        moved, self.requests.cache_moved = self.requests.cache_moved, False
        keeper = self.placement
        if keeper is None or moved:
            return
        for ev in events:
            if isinstance(ev, Folded):
                span = set(ev.fold.span_ids)
                first = next((i for i, m in enumerate(before) if m.id in span), len(before))
                keeper.folded(ev, session.head_tokens + sum(session.sent_tokens(m) for m in before[:first]))

    # -- folds prepared while the user reads, summary requests, fold costs (fold_requests.py) --

    @property
    def prepared(self) -> PreparedFold | None:
        return self.requests.prepared

    def prepared_span(self) -> list[Message] | None:
        return self.requests.prepared_span()

    async def prepare_fold(self) -> PreparedFold | None:
        return await self.requests.prepare_fold()

    def prepared_summary(self, request: Summarize) -> Summary | None:
        return self.requests.prepared_summary(request)

    async def watched_summary(self, request: Summarize) -> Summary:
        """A summary, reported to `on_summary` as it starts and as it ends, whatever the end."""
        report = self.on_summary or noop
        by = self.summarizer.name
        report(SummaryStarted(messages=len(request.span), tokens=sum(m.tokens for m in request.span), by=by))
        try:
            summary = await self.summary_for(request)
        except asyncio.CancelledError:
            report(SummaryEnded(outcome="cancelled"))
            raise
        except Exception as exc:
            report(SummaryEnded(outcome="failed", error=str(exc)))
            raise
        report(SummaryEnded(outcome="failed", error=summary.error) if summary.error else SummaryEnded(outcome="written"))
        return summary

    async def summary_for(self, request: Summarize) -> Summary:
        return await self.requests.summary_for(request)

    async def _policy_step(self, plan: Plan) -> list[Event]:
        try:
            return await self.run_plan(plan)
        except Exception as exc:  # a failed fold must not lose the turn
            self.session.note(f"{self.policy.name} policy: fold failed: {exc}", "error")
            return []

    async def after_add(self) -> list[Event]:
        """The policy's budget check after each message (and the placement's check of a request just recorded)."""
        self._observe_placement()
        return await self._policy_step(self.policy.after_add(self.session, self.policy_context()))

    async def add_message(
        self, role: Any, content: str, *, pinned: bool = False, at: float | None = None, **fields: Any
    ) -> Message:
        """Add a message and let the policy act on it: the path of every message a user, the demo or a trace adds."""
        m = self.session.add(role, content, pinned=pinned, at=at, **fields)
        await self.after_add()
        return m

    async def admit_tool_text(self, tool: str, content: str, *, at: float | None = None) -> Message:
        """A tool's text from a trace or the demo: rungs 1 and 2 as the policy applies them, then its check."""
        m = self.policy.admit_tool(self.session, self.policy_context(), tool, content, at=at)
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
        return self.rent.predict(context_items(self.session), self.session.head_tokens, self.session.clock())[2]

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
        return await self._policy_step(self.policy.before_request(self.session, self.policy_context(), expired=expired))

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
        plan = self.policy.fold_by_hand(self.session, self.policy_context(), span_ids, trigger)
        events = await self.run_plan(plan)
        return next((e for e in reversed(events) if isinstance(e, (Folded, FoldSkipped))), None)

    def unfold(self, fold_no: int) -> Unfolded:
        """Undo fold `fold_no` (`/unfold N`, `u` in the inspector): its originals, read from
        the archive, back in its summary's place if they fit under the fold trigger.
        SessionError says why not; ArchiveError when its archive entry is damaged."""
        originals = self.stores.fold_originals(fold_no)
        event = unfold(self.session, fold_no, originals, limit=self.policy_context().settings.trigger_tokens)
        # the engine's prompt cache may have let the prompt before the fold go: the slot saved
        # before the fold brings it back before the next request (slots.restore_after_unfold)
        keeper = self.slots
        if keeper is not None and keeper.state == "on":
            keeper.restore_pending = fold_no
        return event

    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]:
        return self.requests.reread_after(record)

    def unfold_cost(self, fold_no: int) -> tuple[int, float | None, bool]:
        return self.requests.unfold_cost(fold_no)
