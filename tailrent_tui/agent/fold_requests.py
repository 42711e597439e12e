"""What folds ask of the model and cost the requests around them, for the ladder driver.

- The summary request (`summary_for`): asked in the conversation's own context
  (`summary_context`: the last request's messages, tools and options plus one
  instruction, cut after the span when it would not fit), priced by the rent
  model as the cached read it is; a request of the span alone when the cache
  is cold.
- Folds prepared while the user reads (`prepare_fold`): the next fold's
  summary written ahead, past PRE_TRIGGER of the trigger, and handed to the
  plan's Summarize at the trigger (`prepared_summary`).
- What applying or undoing a fold costs the next request (`reread_after`,
  `unfold_cost`), from the rent model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tailrent_tui.agent.wire import wire_messages
from tailrent_tui.core.messages import FoldRecord, Message
from tailrent_tui.core.policies import FALLBACKS
from tailrent_tui.core.rent import Item, aside_rent, context_item, context_items, prompt_rate
from tailrent_tui.core.rungs.fold import span_messages, span_to_target
from tailrent_tui.core.session import SessionError
from tailrent_tui.core.summarize import Summarize, Summary
from tailrent_tui.models.errors import ModelError
from tailrent_tui.models.summarizer import ModelSummarizer, SummaryContext, aligned_instruction, aligned_messages

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


class FoldRequests:
    """The ladder driver's summary requests, prepared folds and fold costs."""

    def __init__(self, driver: Any) -> None:
        # the LadderDriver (not imported: it imports this module)
        self.driver = driver
        self.state = driver.state
        #: the next fold's summary, written while the user read (`prepare_fold`)
        self.prepared: PreparedFold | None = None

    def prepared_span(self) -> list[Message] | None:
        """The span the ladder would fold at the trigger, when the context is past the pre-trigger
        (PRE_TRIGGER of the trigger) and under the trigger; None otherwise or when nothing folds."""
        s = self.state
        if s.is_sub or not s.settings.fold.prepare or not isinstance(s.summarizer, ModelSummarizer):
            return None
        if self.driver.policy.name != "ladder":
            return None
        settings = self.driver.policy_context().settings
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
        request = Summarize(tuple(span), self.driver.policy_context().settings.summary_budget(tokens))
        summary = await self.driver.summary_for(request)
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
            self.driver.meter.record(predicted, usage, "summary")
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
        tools = self.driver.offered_tools() if self.driver.offered_tools is not None else None
        messages = wire_messages(session)
        items = context_items(session)
        instruction_tokens = session.sent_tokens(session.make_message("user", aligned_instruction_probe(request)))
        whole = session.head_tokens + sum(t for _, t in items) + instruction_tokens + request.budget
        if whole > self.driver.budget_window():
            # the fold comes when the context is near the window: with the instruction and the summary's
            # room it would not fit. What follows the span is not needed to summarize it: the request
            # stops after the span, its prefix still the cached one
            end = max(positions) + 1
            messages, items = messages[:end], items[: end - offset]
        context = SummaryContext(
            messages=messages, positions=positions, tools=tools or None,
            options=self.driver.request_options() if self.driver.request_options is not None else {},
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
        originals = self.driver.stores.fold_originals(fold_no)
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
