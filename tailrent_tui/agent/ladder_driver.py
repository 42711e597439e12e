"""The agent's driver of the ladder: the policy's plans, run against the session with real I/O.

The policy (core/policies) decides in pure code and yields what it needs: a
`Summarize(span)`, answered here by the summarizer (a model's request awaited
when the model writes summaries), or a `Review`, answered by the app's fold
preview. Every fold — the policy's after a message or before a request, and
the user's (`f`, `/fold`) — runs through `run_plan`. The budget arithmetic the
policy is handed (`policy_context`: the window less our counting drift, less
the reply's room) lives here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tailrent_tui.agent.events import SummaryEnded, SummaryStarted, TurnCallbacks, noop
from tailrent_tui.agent.meter import UsageMeter
from tailrent_tui.agent.state import AgentState
from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.messages import Event, Folded, FoldRecord, FoldSkipped, Message, Unfolded
from tailrent_tui.core.policies import FALLBACKS, Plan, Policy, PolicyContext, PolicySettings, get_policy
from tailrent_tui.core.rent import Item, aside_rent, context_item, context_items, prompt_rate
from tailrent_tui.core.rungs.fold import span_messages, span_to_target, unfold
from tailrent_tui.core.session import SessionError
from tailrent_tui.core.summarize import Review, Summarize, Summary, Verdict
from tailrent_tui.models.errors import ContextOverflow, ModelError
from tailrent_tui.models.summarizer import ModelSummarizer, SummaryContext, aligned_instruction, aligned_messages

#: after the server refuses a request as too large, the ladder budgets with this much less of the window
OVERFLOW_SHRINK = 0.85
#: past this share of the fold trigger, an idle agent writes the next fold's summary ahead (`prepare_fold`)
PRE_TRIGGER = 0.8


@dataclass(frozen=True)
class PreparedFold:
    """A summary written ahead, while the user read: the span it covers, as it was then."""

    span_ids: tuple[str, ...]
    span_tokens: int
    summary: Summary

    @property
    def messages(self) -> int:
        return len(self.span_ids)


def aligned_instruction_probe(request: Summarize) -> str:
    """The instruction's words for this span (its size, before the context is cut to fit)."""
    span = list(request.span)
    probe = SummaryContext(messages=[{"role": m.role, "content": m.content} for m in span], positions=tuple(range(len(span))))
    return aligned_instruction(probe, request.budget)


class LadderDriver:
    """Runs the policy's plans (folds, spills, pins) and answers what they ask for."""

    def __init__(self, state: AgentState, meter: UsageMeter, stores: SessionStores) -> None:
        self.state = state
        self.meter = meter
        self.stores = stores
        self._policy: Policy | None = None
        self.window_scale = 1.0
        #: the tools and options a turn's request sends (the agent sets them): a summary request sends the same
        self.offered_tools: Callable[[], list[dict[str, Any]]] | None = None
        self.request_options: Callable[[], dict[str, Any]] | None = None
        #: requests the placement keeper has seen (`_observe_placement`)
        self._observed = len(state.session.usage)
        #: the next fold's summary, written while the user read (`prepare_fold`)
        self.prepared: PreparedFold | None = None

    @property
    def policy(self) -> Policy:
        if self._policy is None or self._policy.name != self.state.settings.policy:
            self._policy = get_policy(self.state.settings.policy)
        return self._policy

    # -- the budget the policy is handed -----------------------------------------

    def token_drift(self) -> float:
        """Tokens the server counts for each one we predict, from its last report (1 to 1.5).

        Our tokenizer is not always the server's, and the chat template adds its own
        tokens: a context that fits by our count may not by the server's.
        """
        for u in reversed(self.state.session.usage):
            if u.prompt_tokens and u.context_tokens and u.sub_session is None:
                return min(1.5, max(1.0, u.prompt_tokens / u.context_tokens))
        return 1.0

    def shrink_window(self) -> None:
        """The server counted more than we did and refused a request: budget with a smaller window from now on."""
        self.window_scale *= OVERFLOW_SHRINK

    def budget_window(self) -> int:
        """The window a request must fit by our count: the server's, less the drift of our
        count from its, less what the server refused before."""
        return max(256, int(self.state.session.window * self.window_scale / self.token_drift()))

    def reply_cap(self) -> int:
        """Tokens a reply may take: the setting, else an eighth of the window."""
        return self.state.settings.max_reply_tokens or max(256, self.state.session.window // 8)

    def policy_context(self) -> PolicyContext:
        s = self.state
        window = s.session.window
        keeper = s.placement
        placed = {"fold_placement": keeper.state.placement} if keeper is not None and keeper.detected else {}
        if s.policy_settings is not None:
            settings = s.policy_settings.model_copy(update={"window": window, **placed})
        else:
            settings = PolicySettings(
                window=window,
                fold_trigger=s.settings.fold_trigger,
                fold_target=s.settings.fold_target,
                resume_fold_target=s.settings.resume_fold_target,
                spill_threshold=s.settings.spill_threshold,
                guard=s.settings.guard,
                # room for the reply, and for what the server counts beyond our count
                reply_reserve=self.reply_cap() + window - self.budget_window(),
                fold_preview=s.settings.fold_preview if s.on_review is not None else "never",
                **placed,
            )
        return PolicyContext(spill_store=s.spill_store, archive=s.archive, settings=settings)

    def check_fits(self) -> None:
        """A request over the window is never sent: the server would refuse it, or cut it silently."""
        s = self.state.session
        reserve = self.reply_cap()
        window = self.budget_window() if self.state.policy_settings is None else s.window
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
        on_review = self.state.on_review
        session = self.state.session
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
        keeper = self.state.placement
        if keeper is None:
            return
        session = self.state.session
        for ev in events:
            if isinstance(ev, Folded):
                span = set(ev.fold.span_ids)
                first = next((i for i, m in enumerate(before) if m.id in span), len(before))
                keeper.folded(ev, session.head_tokens + sum(session.sent_tokens(m) for m in before[:first]))

    # -- folds prepared while the user reads ----------------------------------------------

    def prepared_span(self) -> list[Message] | None:
        """The span the ladder would fold at the trigger, when the context is past the pre-trigger
        (PRE_TRIGGER of the trigger) and under the trigger; None otherwise or when nothing folds."""
        s = self.state
        if s.is_sub or not s.settings.prepare_folds or not isinstance(s.summarizer, ModelSummarizer):
            return None
        if self.policy.name != "ladder":
            return None
        settings = self.policy_context().settings
        # the ladder folds past the trigger, or sooner when the request would not fit with its reply
        session, trigger = s.session, min(settings.trigger_tokens, settings.request_limit)
        if not PRE_TRIGGER * trigger <= session.context_tokens <= trigger:
            return None
        # at the trigger the excess is (trigger - target): ask span_to_target for that much now
        lowered = settings.target_tokens - (trigger - session.context_tokens)
        ids = span_to_target(session, lowered, keep_recent=settings.keep_recent, summary_share=settings.summary_share)
        return span_messages(session, ids) if ids else None

    async def prepare_fold(self) -> PreparedFold | None:
        """Write the next fold's summary now, while nothing else runs (the app calls it when a turn
        ends; the next send cancels it, and the next idle moment starts it again). At the trigger
        the plan's Summarize request is answered with it (`prepared_summary`), so the fold applies
        at once. It is asked like any summary: the conversation's context plus the instruction."""
        span = self.prepared_span()
        if span is None:
            return None
        ids = tuple(m.id for m in span)
        if self.prepared is not None and self.prepared.span_ids == ids:
            return self.prepared
        tokens = sum(m.tokens for m in span)
        request = Summarize(tuple(span), self.policy_context().settings.summary_budget(tokens))
        summary = await self.summary_for(request)
        if summary.error or not summary.text:
            return None
        self.prepared = PreparedFold(ids, tokens, summary)
        if self.state.on_prepared is not None:
            self.state.on_prepared(self.prepared)
        return self.prepared

    def prepared_summary(self, request: Summarize) -> Summary | None:
        """The prepared summary, when it covers the start of the asked span as it still is: the
        messages after it (the trigger came a message or two later than planned) are added in the
        extractive summarizer's words, which costs no request. None when it does not fit."""
        prepared = self.prepared
        if prepared is None:
            return None
        self.prepared = None
        if self.state.on_prepared is not None:
            self.state.on_prepared(None)
        ids = tuple(m.id for m in request.span)
        head = request.span[: len(prepared.span_ids)]
        if ids[: len(prepared.span_ids)] != prepared.span_ids or sum(m.tokens for m in head) != prepared.span_tokens:
            return None
        rest = request.span[len(prepared.span_ids) :]
        text = prepared.summary.text
        if rest:
            text += "\n" + FALLBACKS[0].summarize(rest)
        return Summary(text=text, by=f"{prepared.summary.by}, prepared")

    async def watched_summary(self, request: Summarize) -> Summary:
        """A summary, reported to `on_summary` as it starts and as it ends, whatever the end."""
        report = self.state.on_summary or noop
        by = self.state.summarizer.name
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
        summarizer = self.state.summarizer
        if isinstance(summarizer, ModelSummarizer):
            session = self.state.session
            context, items = self.summary_context(request, summarizer)
            at = session.clock()
            try:
                summary = await summarizer.asummarize(request.span, request.budget, context=context)
            except ModelError as exc:
                return Summary(text="", by=summarizer.name, error=f"the model could not summarize ({exc.message})")
            usage = summarizer.last_usage
            output = usage.output_tokens if usage and usage.output_tokens else 0
            rent = self.state.rent
            if context is not None and rent is not None:
                # journaled like a turn's request, so it is counted and survives a resume; priced as
                # what it is: the conversation's cached prefix read again, then the instruction (it moves
                # the engine's cache as any request does, and is counted apart from the turns)
                predicted = rent.request(items, session.head_tokens, at, output, aside=True)
            else:
                # a request of its own (no conversation to align with, or the cache is cold):
                # all of it read, and the conversation's cache left as it was
                sent = sum(session.count(m["content"]) for m in summarizer.request_messages(request.span))
                predicted = aside_rent(sent, output, getattr(rent, "sheet", None))
            self.meter.record(predicted, usage, "summary")
            return summary
        return Summary(text=summarizer.summarize(request.span), by=summarizer.name)

    def summary_context(self, request: Summarize, summarizer: ModelSummarizer) -> tuple[SummaryContext | None, list[Item]]:
        """The conversation as the next request would send it, with the span's positions in it,
        and its rent items with the summary instruction last; (None, []) when a request of the
        span on its own reads fewer tokens (the cache is cold: the context would be read whole).

        Its messages are `wire_messages` of the session, its tools and options the turn's: the
        same tokens as the last request, so an engine that kept its KV reads only the instruction.
        """
        session = self.state.session
        visible = [m for m in session.messages if not m.cut_off]
        offset = 1 if session.system else 0
        ids = {m.id for m in request.span}
        positions = tuple(i + offset for i, m in enumerate(visible) if m.id in ids)
        if not positions:
            return None, []
        tools = self.offered_tools() if self.offered_tools is not None else None
        messages = wire_messages(session)
        items = context_items(session)
        instruction_tokens = session.sent_tokens(session.make_message("user", aligned_instruction_probe(request)))
        whole = session.head_tokens + sum(t for _, t in items) + instruction_tokens + request.budget
        if whole > self.budget_window():
            # the fold comes when the context is near the window: with the instruction and the summary's
            # room it would not fit. What follows the span is not needed to summarize it: the request
            # stops after the span, its prefix still the cached one
            end = max(positions) + 1
            messages, items = messages[:end], items[: end - offset]
        context = SummaryContext(
            messages=messages, positions=positions, tools=tools or None,
            options=self.request_options() if self.request_options is not None else {},
        )
        instruction = aligned_messages(context, request.budget)[-1]
        if context.messages[-1]["role"] == "user" and items:
            # appended to the last user message: that message is read again with it
            key, _ = items[-1]
            items[-1] = (key + "+summary-request", session.sent_tokens(session.make_message("user", instruction["content"])))
        else:
            items.append(("__summary_request__", session.sent_tokens(session.make_message("user", instruction["content"]))))
        rent = self.state.rent
        if rent is not None:
            whole, cached, _ = rent.predict(items, session.head_tokens, session.clock())
            alone = sum(session.count(m["content"]) for m in summarizer.request_messages(request.span))
            if whole - cached > alone:
                return None, []
        return context, items

    async def _policy_step(self, plan: Plan) -> list[Event]:
        try:
            return await self.run_plan(plan)
        except Exception as exc:  # a failed fold must not lose the turn
            self.state.session.note(f"{self.policy.name} policy: fold failed: {exc}", "error")
            return []

    async def after_add(self) -> list[Event]:
        """The policy's budget check after each message (and the placement's check of a request just recorded)."""
        self._observe_placement()
        return await self._policy_step(self.policy.after_add(self.state.session, self.policy_context()))

    async def add_message(
        self, role: Any, content: str, *, pinned: bool = False, at: float | None = None, **fields: Any
    ) -> Message:
        """Add a message and let the policy act on it: the path of every message a user, the demo or a trace adds."""
        m = self.state.session.add(role, content, pinned=pinned, at=at, **fields)
        await self.after_add()
        return m

    async def admit_tool_text(self, tool: str, content: str, *, at: float | None = None) -> Message:
        """A tool's text from a trace or the demo: rungs 1 and 2 as the policy applies them, then its check."""
        m = self.policy.admit_tool(self.state.session, self.policy_context(), tool, content, at=at)
        await self.after_add()
        return m

    def _observe_placement(self) -> None:
        keeper = self.state.placement
        usage = self.state.session.usage
        if keeper is None:
            return
        fresh, self._observed = usage[self._observed :], len(usage)
        for u in fresh:
            line = keeper.observe(u)
            if line:
                self.state.session.note(line, "warning")

    def _cache_expired(self) -> bool:
        s = self.state
        if s.cold_resume:
            s.cold_resume = False  # build noted it already
            return True
        if s.rent is None:
            return False
        return s.rent.predict(context_items(s.session), s.session.head_tokens, s.session.clock())[2]

    async def before_request(self, cb: TurnCallbacks | None = None) -> list[Event]:
        """The policy's step before each request: after a cache expiry it may fold at no
        extra cost, and it makes the request fit the window with room for the reply."""
        self.stores.refresh_instructions()
        cold = self.state.cold_resume
        expired = self._cache_expired()
        if expired and not cold:
            msg = "the cache expired while you were away: this request writes the prefix again"
            self.state.session.note(msg, "info")
            if cb is not None:
                cb.on_notice(msg, "info")
        return await self._policy_step(self.policy.before_request(self.state.session, self.policy_context(), expired=expired))

    # -- folds by hand ----------------------------------------------------------------

    async def fold(self, span_ids: list[str] | None = None, *, trigger: str = "manual") -> Folded | FoldSkipped | None:
        """The user's fold (`f`, `/fold`): the policy's plan for it, driven like every other.

        A span with a pin, or an archive that cannot write, raises; a fold that
        would not shrink the context comes back as a FoldSkipped with the reason.
        """
        plan = self.policy.fold_by_hand(self.state.session, self.policy_context(), span_ids, trigger)
        events = await self.run_plan(plan)
        return next((e for e in reversed(events) if isinstance(e, (Folded, FoldSkipped))), None)

    def unfold(self, fold_no: int) -> Unfolded:
        """Undo fold `fold_no` (`/unfold N`, `u` in the inspector): its originals, read from
        the archive, back in its summary's place if they fit under the fold trigger.
        SessionError says why not; ArchiveError when its archive entry is damaged."""
        originals = self.stores.fold_originals(fold_no)
        return unfold(self.state.session, fold_no, originals, limit=self.policy_context().settings.trigger_tokens)

    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]:
        """What applying this fold costs the next request: the tokens it reads again (the rent
        model's prediction of the folded context: in place, what follows the summary; after the
        kept messages on an engine that shifts KV, the summary), and their seconds at the
        measured rate."""
        session = self.state.session
        span = set(record.span_ids)
        rent = self.state.rent
        if rent is None or rent.last_at is None:
            # nothing cached yet: what the fold adds is the tokens from the summary's place on
            first = next((i for i, m in enumerate(session.messages) if m.id in span), len(session.messages))
            tokens = session.sent_tokens(record.summary) + sum(
                session.sent_tokens(m) for m in session.messages[first:] if m.id not in span and not m.cut_off
            )
            if record.position == 0:
                tokens = record.context_after - session.head_tokens
            rate = prompt_rate(session.usage, rent.sheet) if rent is not None else None
            return tokens, (rate.seconds(tokens) if rate is not None and rate.measured else None)
        kept = [context_item(session, m) for m in session.messages if m.id not in span and not m.cut_off]
        kept.insert(min(record.position, len(kept)), context_item(session, record.summary))
        return self._reread(kept)

    def unfold_cost(self, fold_no: int) -> tuple[int, float | None, bool]:
        """What undoing fold `fold_no` costs the next request: (tokens read again, their seconds at
        the measured rate, whether the engine's prompt cache still holds the prompt before the
        fold, so that they are few). Raises SessionError/ArchiveError as `unfold` would."""
        session = self.state.session
        record = next((f for f in session.folds if f.fold_no == fold_no), None)
        if record is None:
            raise SessionError(f"no fold #{fold_no}")
        originals = self.stores.fold_originals(fold_no)
        items: list[Item] = []
        for m in session.messages:
            if m.cut_off:
                continue
            if m.id == record.summary.id:
                items += [context_item(session, o) for o in originals if not o.cut_off]
            else:
                items.append(context_item(session, m))
        tokens, seconds = self._reread(items)
        rent = self.state.rent
        kept = rent is not None and rent.prompt_cache_gain(items, session.head_tokens, session.clock()) > 0
        return tokens, seconds, kept

    def _reread(self, items: list[Item]) -> tuple[int, float | None]:
        session = self.state.session
        rent = self.state.rent
        if rent is None:
            return session.head_tokens + sum(t for _, t in items), None
        context, cached, _ = rent.predict(items, session.head_tokens, session.clock())
        tokens = context - cached
        rate = prompt_rate(session.usage, rent.sheet)
        return tokens, (rate.seconds(tokens) if rate is not None and rate.measured else None)
