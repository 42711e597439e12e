"""Who writes a fold's summary, what it asks of the model, and what folds cost the requests around them.

The ladder driver (ladder_driver.py) answers each `Summarize` of a plan here
(`answer`); the app prepares folds here directly.

- The summary request (`summary_for`): asked in the conversation's own context
  (`summary_context`: the last request's messages, tools and options plus one
  instruction, cut after the span when it would not fit), priced by the rent
  model as the cached read it is; a request of the span alone when the cache
  is cold.
- Folds prepared while the user reads (`prepare_fold`): the next fold's
  summary written ahead, past PRE_TRIGGER of the trigger, and handed to the
  plan's Summarize at the trigger (`prepared_summary`).

What applying or undoing a fold costs the next request is fold_costs.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tailrent_tui.agent.budget import LadderBudget
from tailrent_tui.agent.events import SummaryEnded, SummaryProgress, SummaryStarted, noop
from tailrent_tui.agent.kv_slots import SlotKeeper, save_before_fold
from tailrent_tui.agent.meter import UsageMeter
from tailrent_tui.agent.placement import PlacementKeeper
from tailrent_tui.agent.stores import SessionStores
from tailrent_tui.agent.wire import wire_entries, wire_entries_of, wire_messages
from tailrent_tui.core import ledger as ledger_rules
from tailrent_tui.core.ledger import Statement
from tailrent_tui.core.messages import Message
from tailrent_tui.core.policies import FALLBACKS, LADDER_HEADER, fold_goal
from tailrent_tui.core.rent import Item, RentModel, aside_rent, context_item, context_items, lines_read_again
from tailrent_tui.core.rungs.fold import after_position, prepare_fold, span_messages, span_to_target, stable_order
from tailrent_tui.core.session import Session, SessionError
from tailrent_tui.core.summarize import Summarize, Summarizer, Summary, check_summary, fit_budget
from tailrent_tui.models.base import Usage
from tailrent_tui.models.errors import ModelError
from tailrent_tui.models.summarizer import (
    ModelSummarizer,
    SummaryContext,
    aligned_instruction,
    aligned_messages,
    asks_apart,
)
from tailrent_tui.settings import Settings

#: past this share of the fold trigger, an idle agent writes the next fold's summary ahead (`prepare_fold`)
PRE_TRIGGER = 0.8
#: a summary request near the window asks for a shorter summary rather than leave the kept messages out,
#: down to a third of its budget and never under this many tokens
MIN_FIT_BUDGET = 48
#: tokens kept free for the difference between our count and the server's
FIT_MARGIN = 16


def asked_key(instruction: str) -> str:
    """The rent item of a summary request's instruction (its answer's is `answer_key`): when the fold
    keeps them as its summary, the rent model renames the two to the summary message."""
    return f"__summary_request__:{hash(instruction)}"


def answer_key(instruction: str) -> str:
    return f"__summary_answer__:{hash(instruction)}"


def ledger_key(instruction: str) -> str:
    return f"__summary_ledger__:{hash(instruction)}"


def note_key(content: str) -> str:
    """The rent item of a prepared fallback summary sent ahead as a context note (`warm`)."""
    return f"__summary_note__:{hash(content)}"


@dataclass(frozen=True)
class PreparedFold:
    """A summary written ahead, while the user read: the span it covers, as it was then."""

    span_ids: tuple[str, ...]
    span_tokens: int
    summary: Summary
    #: the span as the ladder takes it, statements and all (what the fold's ledger carries from)
    raw_ids: tuple[str, ...] = ()
    #: those messages' tokens then (an edit since makes the summary stale)
    raw_tokens: int = 0

    @property
    def messages(self) -> int:
        return len(self.span_ids)


def aligned_instruction_probe(request: Summarize) -> str:
    """The instruction's words for this span (its size, before the context is cut to fit)."""
    span = list(request.span)
    probe = SummaryContext(messages=[{"role": m.role, "content": m.content} for m in span], positions=tuple(range(len(span))))
    return aligned_instruction(probe, request.budget)


class FoldRequests:
    """The summaries a fold asks for: written now, or prepared ahead while the user reads."""

    def __init__(
        self,
        *,
        session: Session,
        settings: Settings,
        budget: LadderBudget,
        summarizer: Summarizer | ModelSummarizer,
        meter: UsageMeter,
        stores: SessionStores,
        rent: RentModel | None,
        slots: SlotKeeper | None = None,
        placement: PlacementKeeper | None = None,
        offered_tools: Callable[[], list[dict[str, Any]]] | None = None,
        request_options: Callable[[], dict[str, Any]] | None = None,
        is_sub: bool = False,
    ) -> None:
        """`budget`: the window a summary request is fitted to, and the trigger a fold is prepared
        against; `offered_tools`, `request_options`: what a turn's request sends (a summary request in
        the conversation's context sends the same)."""
        self.session = session
        self.settings = settings
        self.budget = budget
        #: who writes the summaries (a /model switch changes it: `model_changed`)
        self.summarizer = summarizer
        self.meter = meter
        self.stores = stores
        self.rent = rent
        self.slots = slots
        self.placement = placement
        self.offered_tools = offered_tools
        self.request_options = request_options
        self.is_sub = is_sub
        #: told when a fold's summary is asked for and when it is in: folds run inside
        #: a turn and by hand, so this belongs to the ladder, not to one turn's callbacks
        self.on_summary: Callable[[SummaryProgress], None] | None = None
        #: told when a fold's summary is written ahead (`prepare_fold`), and when it is used or dropped (None)
        self.on_prepared: Callable[[PreparedFold | None], None] | None = None
        #: the next fold's summary, written while the user read (`prepare_fold`)
        self.prepared: PreparedFold | None = None
        #: the request number of the prepared summary's last request (`warm` sends it again after a turn)
        self.prepared_at = 0
        #: the budget the last `summary_context` fitted the request to (a shorter one near the window)
        self.fitted_budget = 0
        #: a summary request of the span alone replaced the engine's slot since the last fold was placed
        self.cache_moved = False
        #: the ledger text the last `warm` sent after the prepared summary, and its statements in that order
        self.warmed_ledger: str | None = None
        self.warmed_order: tuple[str, ...] = ()
        #: the summary message a prepared fallback's last `warm` sent as a context note
        self.warmed_note: str | None = None

    def model_changed(self, summarizer: Summarizer | ModelSummarizer) -> None:
        """A /model switch: `summarizer` writes the summaries from now on; a fold prepared by the old
        model, for the old server's cache, is dropped."""
        self.summarizer = summarizer
        if self.prepared is not None:
            self.prepared = None
            if self.on_prepared is not None:
                self.on_prepared(None)

    async def answer(self, request: Summarize) -> Summary:
        """The summary a plan's Summarize asks for: the prepared one when it covers the span, else
        one asked now (`watched_summary`)."""
        ready = self.prepared_summary(request)
        return ready if ready is not None else await self.watched_summary(request)

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

    def fold_applied(self) -> bool:
        """A plan's folds are applied: the last one is known by its summary's name from now on
        (`rename_folded`). Whether a summary request of the span alone moved the engine's cache
        since the last fold (then the next request is no test of where the fold was placed)."""
        self.rename_folded()
        moved, self.cache_moved = self.cache_moved, False
        return moved

    def prepared_span(self) -> list[Message] | None:
        """The span the ladder would fold at the trigger, when the context is past the pre-trigger
        (PRE_TRIGGER of the trigger) and under the trigger; None otherwise or when nothing folds."""
        if self.is_sub or not self.settings.fold.prepare or not isinstance(self.summarizer, ModelSummarizer):
            return None
        if self.budget.policy.name != "ladder":
            return None
        settings = self.budget.policy_context().settings
        # the ladder folds past the trigger, or sooner when the request would not fit with its reply
        session, trigger = self.session, min(settings.trigger_tokens, settings.request_limit)
        if not PRE_TRIGGER * trigger <= session.context_tokens <= trigger:
            return None
        # at the trigger the excess is (trigger - goal): ask span_to_target for that much now; the
        # user's next message will be one of the messages the fold keeps, so one fewer is kept now
        # (else the span at the trigger runs a message longer, and that message is added unsummarized).
        # The goal is the ladder's (`fold_goal`: the target with the pins on top): prepared to the bare
        # target, the span ran two messages past the one taken at the trigger, the prepared fold was not
        # used, and fold 1's turn read 1,463 tokens on the 30-turn bench (benchmarks/RESULTS.md, eighth pass)
        goal = fold_goal(session, settings, trigger)
        lowered = goal - (trigger - session.context_tokens)
        keep = max(0, settings.keep_recent - 1)
        ids = span_to_target(
            session, lowered, keep_recent=keep, summary_share=settings.summary_share, turn_ends=settings.fold_turn_ends
        )
        return span_messages(session, ids) if ids else None

    async def prepare_fold(self) -> PreparedFold | None:
        """`_prepare_fold`; when it sent nothing, the context as it is when the engine would read much of it
        again (`send_context_ahead`). After a prepared fold's requests it is not sent: they take the engine's
        slot, and the turn after reads from where its context leaves theirs (on the 30-turn bench the context
        sent before them was read again, ~330 tokens thrice for nothing)."""
        before = self.meter.request_no
        prepared = await self._prepare_fold()
        if self.meter.request_no == before:
            await self.send_context_ahead()
        return prepared

    async def _prepare_fold(self) -> PreparedFold | None:
        """Write the next fold's summary now, while nothing else runs (the app calls it when a turn
        ends; the next send cancels it, and the next idle moment starts it again). At the trigger
        the plan's Summarize request is answered with it (`prepared_summary`), so the fold applies
        at once. It is asked like any summary: the conversation's context plus the instruction."""
        span = self.prepared_span()
        if span is None:
            return None
        raw = span
        session = self.session
        if session.statements:
            # as the ladder will ask it (`ask_summary`): without the statements the fold carries
            span = session.summarizable(span)
            if not span:
                return None
        ids = tuple(m.id for m in span)
        tokens = sum(m.tokens for m in span)
        raw_ids = tuple(m.id for m in raw)
        request = Summarize(tuple(span), self.budget.policy_context().settings.summary_budget(tokens))
        if self.prepared is not None and self._same_messages(self.prepared, raw_ids):
            # the same messages: what the ledger carries of them may have moved (the pins' budget
            # binds differently as statements come), the summary of them has not
            if self.meter.request_no > self.prepared_at:
                await self.warm(self.prepared, request)
            return self.prepared
        summary = await self.summary_for(request)
        if summary.error or not summary.text:
            return None
        why = check_summary(summary, span_tokens=tokens, count=session.count, span=span)
        if why is not None:
            # refused now as it would be at the trigger: the fallback's summary is prepared instead (fitted to
            # the budget the ladder gives it), and the context the fold leaves with it is sent ahead while the
            # user reads. At the trigger it was new text with the ledger after it: 1,421 tokens read on llama.cpp
            fallback = FALLBACKS[0]
            budget = self.budget.policy_context().settings.summary_budget(sum(m.tokens for m in raw))
            text = fit_budget(fallback.summarize(span), budget, session.count)
            summary = Summary(
                text=text,
                by=f"{fallback.name} ({summary.by}'s refused: {why})",
                rejected=f"{summary.by}'s summary refused: {why}",
            )
        self.prepared_at = self.meter.request_no
        self.prepared = PreparedFold(ids, tokens, summary, raw_ids, sum(m.tokens for m in raw))
        if self._ledger_text(self.prepared) is not None or summary.asked is None:
            # the statements the fold will carry (and a fallback's summary) are new tokens: read them now
            await self.warm(self.prepared, request)
        if self.on_prepared is not None:
            self.on_prepared(self.prepared)
        return self.prepared

    async def send_context_ahead(self) -> None:
        """The context as the next request will start, sent now (one token asked) when the engine would read
        much of it again: a fold that came after the reply (the reply took the context past the trigger, so it
        was not prepared) left a summary and a ledger the engine never read, often the fallback's new text. On
        the 30-turn bench the request after such a fold read 614 tokens where an ordinary turn reads 253. Only
        where folds go after the kept messages on a local engine, confirmed (a first post-fold request that
        found its cache is what confirms it: this must not stand in for that test)."""
        summarizer, keeper, rent = self.summarizer, self.placement, self.rent
        if self.is_sub or not self.settings.fold.prepare or not isinstance(summarizer, ModelSummarizer):
            return
        if rent is None or not rent.sheet.local or keeper is None:
            return
        if keeper.state.placement != "after" or not keeper.state.confirmed or keeper.expect_prompt_cache:
            return
        session = self.session
        if not session.folds:
            return
        messages = wire_messages(session)
        if len(messages) < 2 or messages[-1].get("role") != "user":
            return  # a context that ends on a reply is the one the engine holds (or a prefill: not sent)
        items = context_items(session)
        at = session.clock()
        whole, cached, _ = rent.predict(items, session.head_tokens, at)
        if whole - cached < max(rent.sheet.reuse_min_tokens, 64):
            return
        tools = self.offered_tools() if self.offered_tools is not None else None
        options = {**(self.request_options() if self.request_options is not None else {}), **summarizer.options, "max_tokens": 1}
        usage: Usage | None = None
        try:
            async for chunk in summarizer.model.stream(messages, tools=tools or None, options=options):
                if isinstance(chunk, Usage):
                    usage = chunk
        except ModelError:
            return
        predicted = rent.request(items, session.head_tokens, at, 0, aside=True)
        self.meter.record(predicted, usage, "summary")

    async def warm(self, prepared: PreparedFold, request: Summarize) -> None:
        """Send what the request after this prepared fold will start with, one token asked, so that at
        the trigger the engine finds it cached: the ledger the fold carries (new tokens) read now, while
        the user reads, and the summary again when a turn came since it was written. Priced and
        journaled as a summary request (it is the prepared fold's).

        Two shapes. The conversation with the prepared instruction, summary and ledger after it, when
        that fits the window: llama.cpp shifts the kept messages and the rest past the span at the
        fold. Near the window it does not fit (a ledger can be 40% of it): then, on an engine that keeps
        recent prompts (llama.cpp's --cache-ram) and folds after the kept messages, the context as the
        fold will leave it (the span out, the summary and the ledger after the last reply); the next
        turn, if it comes before the trigger, finds its own prompt in the engine's prompt cache.
        Skipped when the instruction would read differently now, or the model does not write the
        summaries."""
        summarizer = self.summarizer
        asked = prepared.summary.asked
        if not isinstance(summarizer, ModelSummarizer):
            return
        context, items = self.summary_context(request, summarizer)
        if context is None or not asks_apart(context):
            return
        session = self.session
        text = prepared.summary.text
        carried = self._ledger_carried(prepared)
        ledger = ledger_rules.ledger_text(carried) if carried else None
        note = f"[context note]\n{ledger}" if ledger is not None else None
        if asked is not None:
            if aligned_instruction(context, self.fitted_budget) != asked:
                return
            tag = asked
            summary_items = [(answer_key(asked), session.count(text))]
            summary_messages = [{"role": "user", "content": asked}, {"role": "assistant", "content": text}]
        else:
            # a fallback's summary (the model's was refused): it will travel as a context note, as the fold writes it
            content = self._fallback_content(prepared)
            if content is None:
                return
            tag = f"note:{content}"
            self.warmed_note = content
            items = items[:-1]  # no instruction is sent
            summary_items = [(note_key(content), session.sent_tokens(session.make_message("system", content)))]
            summary_messages = [{"role": "user", "content": f"[context note]\n{content}"}]
        ledger_item = (ledger_key(tag), session.sent_tokens(session.make_message("system", ledger))) if ledger else None
        tail_items = [*summary_items, *([ledger_item] if ledger_item is not None else [])]
        fits = session.head_tokens + sum(t for _, t in [*items, *tail_items]) + 1 + FIT_MARGIN <= self.budget.budget_window()
        if fits:
            messages = [*context.messages, *summary_messages]
            items = [*items, *tail_items]
        elif (keeper := self._folds_after_with_prompt_cache()) is not None:
            messages, items = self._post_fold(prepared, asked)
            messages += summary_messages
            items += tail_items
            keeper.expect_prompt_cache = True
        else:
            return
        if note is not None:
            messages.append({"role": "user", "content": note})
        self.warmed_ledger = ledger
        self.warmed_order = tuple(st.id for st in carried)
        options = {**context.options, **summarizer.options, "max_tokens": 1}
        at = session.clock()
        usage: Usage | None = None
        try:
            async for chunk in summarizer.model.stream(messages, tools=context.tools, options=options):
                if isinstance(chunk, Usage):
                    usage = chunk
        except ModelError:
            return
        rent = self.rent
        predicted = None
        if rent is not None:
            predicted = rent.request(items, session.head_tokens, at, 0, aside=True)
        self.prepared_at = self.meter.request_no + 1
        self.meter.record(predicted, usage, "summary")

    def _folds_after_with_prompt_cache(self) -> PlacementKeeper | None:
        """The placement keeper when folds go after the kept messages on an engine with a prompt cache."""
        keeper, rent = self.placement, self.rent
        if keeper is None or keeper.state.placement != "after" or rent is None:
            return None
        return keeper if rent.sheet.reuses_shifted_kv and rent.sheet.prompt_cache else None

    def _post_fold(self, prepared: PreparedFold, asked: str | None) -> tuple[list[dict[str, Any]], list[Item]]:
        """The wire messages and rent items of the context the prepared fold leaves, up to its summary
        (placed after the kept messages), the instruction's item last (when the model's summary answers one)."""
        session = self.session
        raw = set(prepared.raw_ids)
        kept = [m for m in session.messages if m.id not in raw]
        before = [m for m in kept[: after_position(session, raw)] if not m.cut_off]
        messages = [entry for _, entry in wire_entries_of(session.system, before)]
        items = [context_item(session, m) for m in before]
        if asked is not None:
            items.append((asked_key(asked), session.sent_tokens(session.make_message("user", asked))))
        return messages, items

    def _fallback_content(self, prepared: PreparedFold) -> str | None:
        """The summary message a prepared fallback's text makes, as the ladder's fold will write it now
        (its header, the guard's repairs); None when the prepared messages are no longer all there."""
        session = self.session
        if not prepared.raw_ids or any(i not in session for i in prepared.raw_ids):
            return None
        ctx = self.budget.policy_context()
        try:
            record = prepare_fold(
                session,
                list(prepared.raw_ids),
                summary=prepared.summary.text,
                summarizer_name=prepared.summary.by,
                guard=self.budget.policy.guard_for(ctx),
                position=ctx.settings.fold_placement,
                header=LADDER_HEADER,
            )
        except SessionError:
            return None  # one of them was pinned since: the fold at the trigger will not take this span
        return record.summary.content

    def _ledger_text(self, prepared: PreparedFold) -> str | None:
        """The ledger message the fold of this span will carry (core makes it the same way), or None."""
        carried = self._ledger_carried(prepared)
        return ledger_rules.ledger_text(carried) if carried else None

    def _ledger_carried(self, prepared: PreparedFold) -> list[Statement]:
        """The statements the fold of this span will carry, those of the ledger sent ahead last first, in
        the order sent (`stable_order`: the fold at the trigger orders them so too), the others in the order
        the pins' budget keeps them (`Session.carried_by`: recognized statements by score, the user's
        unrecognized words last). When the budget binds harder at the trigger (the user's next message takes
        some of it), the lines that leave are then the ledger's last, a cut the engine reads nothing for; in
        the transcript's order they were a dozen gaps between lines shorter than llama.cpp's shift, and
        the request after fold 1 of the 30-turn bench read the whole ledger again (718 tokens)."""
        session = self.session
        if not session.statements or not prepared.raw_ids:
            return []
        carried = session.carried_by([session.get(i) for i in prepared.raw_ids if i in session])
        ranked = sorted(carried, key=lambda st: (st.said, -st.score))
        return stable_order(ranked, self.warmed_order)

    def prepared_summary(self, request: Summarize) -> Summary | None:
        """The prepared summary, when it covers the start of the asked span as it still is: the
        messages after it (the trigger came a message or two later than planned) are added in the
        extractive summarizer's words, which costs no request. None when it does not fit."""
        prepared = self.prepared
        if prepared is None:
            return None
        self.prepared = None
        if self.on_prepared is not None:
            self.on_prepared(None)
        if request.ids and prepared.raw_ids:
            # a span with statements: matched on the messages the fold takes, not on their text less
            # what the ledger carries (that moves with the pins' budget between the prepare and the trigger)
            if not self._same_messages(prepared, request.ids[: len(prepared.raw_ids)]):
                return None
            taken = set(prepared.raw_ids)
            rest = [m for m in request.span if m.id not in taken]
        else:
            ids = tuple(m.id for m in request.span)
            head = request.span[: len(prepared.span_ids)]
            if ids[: len(prepared.span_ids)] != prepared.span_ids or sum(m.tokens for m in head) != prepared.span_tokens:
                return None
            rest = list(request.span[len(prepared.span_ids) :])
        text = prepared.summary.text
        if rest:
            text += "\n" + FALLBACKS[0].summarize(rest)
        return Summary(
            text=text,
            by=f"{prepared.summary.by}, prepared",
            asked=prepared.summary.asked,
            rejected=prepared.summary.rejected,
            ledger_order=self.warmed_order if self.warmed_ledger is not None else (),
        )

    def _same_messages(self, prepared: PreparedFold, raw_ids: tuple[str, ...]) -> bool:
        """Whether `raw_ids` are the messages the prepared summary was written of, unedited since."""
        session = self.session
        if not prepared.raw_ids or raw_ids != prepared.raw_ids or any(i not in session for i in raw_ids):
            return False
        return sum(session.get(i).tokens for i in raw_ids) == prepared.raw_tokens

    async def summary_for(self, request: Summarize) -> Summary:
        await save_before_fold(self.slots)
        summarizer = self.summarizer
        if isinstance(summarizer, ModelSummarizer):
            session = self.session
            context, items = self.summary_context(request, summarizer)
            if context is not None:
                request = replace(request, budget=self.fitted_budget)
            at = session.clock()
            try:
                summary = await summarizer.asummarize(request.span, request.budget, context=context)
            except ModelError as exc:
                return Summary(text="", by=summarizer.name, error=f"the model could not summarize ({exc.message})")
            usage = summarizer.last_usage
            output = usage.output_tokens if usage and usage.output_tokens else 0
            rent = self.rent
            if context is not None and rent is not None:
                # journaled like a turn's request, so it is counted and survives a resume; priced as
                # what it is: the conversation's cached prefix read again, then the instruction (it moves
                # the engine's cache as any request does, and is counted apart from the turns)
                predicted = rent.request(items, session.head_tokens, at, output, aside=True)
                if summary.asked is not None and output:
                    # the engine keeps the answer it wrote: the fold sends it back as it was
                    rent.generated((answer_key(summary.asked), output))
            else:
                # a request of its own (no conversation to align with, or the cache is cold):
                # all of it read, and the conversation's cache left as it was
                sent = sum(session.count(m["content"]) for m in summarizer.request_messages(request.span))
                predicted = aside_rent(sent, output, getattr(rent, "sheet", None))
                # the engine's slot held another prompt meanwhile: the next request is no test of its KV shift
                self.cache_moved = True
                if rent is not None and rent.sheet.local:
                    rent.expire()  # and it reads the conversation again
            self.meter.record(predicted, usage, "summary")
            return summary
        return Summary(text=summarizer.summarize(request.span), by=summarizer.name)

    def summary_context(self, request: Summarize, summarizer: ModelSummarizer) -> tuple[SummaryContext | None, list[Item]]:
        """The conversation as the last request sent it, with the span's positions in it, and its
        rent items with the summary instruction last; (None, []) when a request of the span on its
        own reads fewer tokens (the cache is cold: the context would be read whole).

        Its messages are `wire_messages` of the session, its tools and options the turn's: the
        same tokens as the last request, so an engine that kept its KV reads only the instruction.
        The context stops where a fold placed `after` puts its summary (`after_position`): before
        the turn in flight (the user's new message, a tool exchange), which the engine has not
        read yet, so the instruction is a message of its own after a reply. The fold then keeps
        the instruction and the summary as a question and its answer, where they were asked:
        tokens the engine holds already.
        """
        session = self.session
        self.rename_folded()
        ids = {m.id for m in request.span}
        entries = wire_entries(session)
        visible = [m for m in session.messages if not m.cut_off]
        if not any(m.id in ids for m in visible):
            return None, []
        # the messages before the summary's place, in the session (the span among them)
        kept_before = after_position(session, ids)
        kept = [m for m in session.messages if m.id not in ids]
        last_span = max(i for i, m in enumerate(session.messages) if m.id in ids)
        end_index = last_span + 1
        if kept_before > 0:
            end_index = max(end_index, session.messages.index(kept[kept_before - 1]) + 1)
        ends = self._cut(session, entries, visible, end_index)
        tools = self.offered_tools() if self.offered_tools is not None else None
        options = self.request_options() if self.request_options is not None else {}
        context, items = self._context(session, entries, ends, ids, tools, options)
        instruction_tokens = session.sent_tokens(session.make_message("user", aligned_instruction_probe(request)))
        room = self.budget.budget_window() - (session.head_tokens + sum(t for _, t in items) + instruction_tokens)
        room -= FIT_MARGIN
        if room < request.budget:
            # the fold comes when the context is near the window: with the instruction and the summary's
            # room it would not fit. A shorter summary, when it is not much shorter, keeps the engine's
            # cache of everything (stopping the request after the span would overwrite the kept messages'
            # KV with the summary's, and the request after the fold would read them again)
            if room >= max(MIN_FIT_BUDGET, request.budget // 3):
                request = replace(request, budget=room)
            else:
                # else what follows the span is left out: the request stops after the span, its prefix
                # still the cached one
                # (the instruction follows as a message of its own: appended to the span's last message, a
                # user's, that message was read again, 250 of 382 tokens on llama.cpp; a template that refuses
                # two user messages in a row gets them joined)
                ends = self._cut(session, entries, visible, last_span + 1)
                context, items = self._context(session, entries, ends, ids, tools, options)
                context = replace(context, apart=True)
        self.fitted_budget = request.budget
        instruction = aligned_messages(context, request.budget)[-1]
        sent = session.sent_tokens(session.make_message("user", instruction["content"]))
        if not asks_apart(context) and items:
            # appended to the last user message: that message is read again with it
            key, _ = items[-1]
            items[-1] = (key + "+summary-request", sent)
        else:
            items.append((asked_key(instruction["content"]), sent))
        rent = self.rent
        if rent is not None:
            whole, cached, _ = rent.predict(items, session.head_tokens, session.clock())
            alone = sum(session.count(m["content"]) for m in summarizer.request_messages(request.span))
            # on a local engine a request of the span alone takes the slot: the next turn reads the whole
            # context again (measured: 988 tokens instead of ~680), so it is cheaper only when nothing is cached
            if whole - cached > alone and not (rent.sheet.local and cached > 0):
                return None, []
        return context, items

    def rename_folded(self) -> None:
        """The last fold's summary, asked in context, is the summary request's instruction and answer
        the rent model holds last: it is known by the summary's name from now on (`RentModel.rename`)."""
        rent, session = self.rent, self.session
        record = session.folds[-1] if session.folds else None
        if rent is None or record is None or record.summary.id not in session:
            return
        asked = record.summary.meta.get("asked")
        if isinstance(asked, str):
            tag, keys = asked, [asked_key(asked), answer_key(asked)]
        else:
            # a prepared fallback's summary sent ahead as a context note (`warm`)
            content, warmed = record.summary.content, self.warmed_note
            if warmed is not None and (warmed.startswith(content) or content.startswith(warmed)):
                # the guard's repair line at the trigger is not the one sent ahead (the user's next message showed
                # or hid a fact): llama.cpp shifts the common text all the same and reads a line at most (fold 2 of
                # the 30-turn bench: 256 read, 401 predicted as the whole note read again)
                content = warmed
            tag = f"note:{content}"
            keys = [note_key(content)]
        summary = context_item(session, session.get(record.summary.id))
        if record.ledger is not None and record.ledger.id in session:
            # a prepared fold sent its ledger after the pair too (`warm`): the same tokens when the fold carries
            # the same statements (the user's next message may have corrected one since: then it is read again)
            ledger = context_item(session, session.get(record.ledger.id))
            reread: int | None = 0
            if record.ledger.content != self.warmed_ledger:
                # lines the user's next message superseded leave it, lines it made room for come last
                # (`stable_order`): an engine that shifts KV reads those and what follows only
                reread = None
                if self.warmed_ledger is not None and rent.sheet.reuses_shifted_kv:
                    before, now = self.warmed_ledger, record.ledger.content
                    reread = lines_read_again(before, now, session.count, rent.sheet.reuse_min_tokens)
                if reread is None:
                    ledger = (ledger_key(tag), ledger[1])
            if rent.rename([*keys, ledger_key(tag)], [summary, ledger], reread=reread or 0):
                return
        rent.rename(keys, [summary])

    @staticmethod
    def _cut(session: Session, entries: list[tuple[str | None, Any]], visible: list[Message], end_index: int) -> tuple[int, int]:
        """(wire entries, visible messages) before session message `end_index`."""
        before = {m.id for m in session.messages[:end_index]}
        n_entries = sum(1 for owner, _ in entries if owner is None or owner in before)
        n_visible = sum(1 for m in visible if m.id in before)
        return n_entries, n_visible

    def _context(
        self,
        session: Session,
        entries: list[tuple[str | None, Any]],
        ends: tuple[int, int],
        ids: set[str],
        tools: list[dict[str, Any]] | None,
        options: dict[str, Any],
    ) -> tuple[SummaryContext, list[Item]]:
        n_entries, n_visible = ends
        messages = [entry for _, entry in entries[:n_entries]]
        positions = tuple(i for i, (owner, _) in enumerate(entries[:n_entries]) if owner in ids)
        items = context_items(session)[:n_visible]
        later = [entry for _, entry in entries[n_entries:]]
        context = SummaryContext(messages=messages, positions=positions, tools=tools or None, options=options, later=later)
        return context, items
