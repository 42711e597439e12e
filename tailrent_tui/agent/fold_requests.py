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

from dataclasses import dataclass, replace
from typing import Any

from tailrent_tui.agent.kv_slots import save_before_fold
from tailrent_tui.agent.wire import wire_entries, wire_entries_of
from tailrent_tui.core import ledger as ledger_rules
from tailrent_tui.core.messages import FoldRecord, Message
from tailrent_tui.core.policies import FALLBACKS, LADDER_HEADER
from tailrent_tui.core.rent import Item, aside_rent, context_item, context_items, prompt_rate
from tailrent_tui.core.rungs.fold import after_position, prepare_fold, span_messages, span_to_target
from tailrent_tui.core.session import SessionError
from tailrent_tui.core.summarize import Summarize, Summary, check_summary, fit_budget
from tailrent_tui.models.base import Usage
from tailrent_tui.models.errors import ModelError
from tailrent_tui.models.summarizer import (
    ModelSummarizer,
    SummaryContext,
    aligned_instruction,
    aligned_messages,
    asks_apart,
)

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
    """The ladder driver's summary requests, prepared folds and fold costs."""

    def __init__(self, driver: Any) -> None:
        # the LadderDriver (not imported: it imports this module)
        self.driver = driver
        #: the next fold's summary, written while the user read (`prepare_fold`)
        self.prepared: PreparedFold | None = None
        #: the request number of the prepared summary's last request (`warm` sends it again after a turn)
        self.prepared_at = 0
        #: the budget the last `summary_context` fitted the request to (a shorter one near the window)
        self.fitted_budget = 0
        #: a summary request of the span alone replaced the engine's slot since the last fold was placed
        self.cache_moved = False
        #: the ledger text the last `warm` sent after the prepared summary
        self.warmed_ledger: str | None = None

    def prepared_span(self) -> list[Message] | None:
        """The span the ladder would fold at the trigger, when the context is past the pre-trigger
        (PRE_TRIGGER of the trigger) and under the trigger; None otherwise or when nothing folds."""
        s = self.driver
        if s.is_sub or not s.settings.fold.prepare or not isinstance(s.summarizer, ModelSummarizer):
            return None
        if self.driver.policy.name != "ladder":
            return None
        settings = self.driver.policy_context().settings
        # the ladder folds past the trigger, or sooner when the request would not fit with its reply
        session, trigger = s.session, min(settings.trigger_tokens, settings.request_limit)
        if not PRE_TRIGGER * trigger <= session.context_tokens <= trigger:
            return None
        # at the trigger the excess is (trigger - target): ask span_to_target for that much now; the
        # user's next message will be one of the messages the fold keeps, so one fewer is kept now
        # (else the span at the trigger runs a message longer, and that message is added unsummarized)
        lowered = settings.target_tokens - (trigger - session.context_tokens)
        keep = max(0, settings.keep_recent - 1)
        ids = span_to_target(
            session, lowered, keep_recent=keep, summary_share=settings.summary_share, turn_ends=settings.fold_turn_ends
        )
        return span_messages(session, ids) if ids else None

    async def prepare_fold(self) -> PreparedFold | None:
        """Write the next fold's summary now, while nothing else runs (the app calls it when a turn
        ends; the next send cancels it, and the next idle moment starts it again). At the trigger
        the plan's Summarize request is answered with it (`prepared_summary`), so the fold applies
        at once. It is asked like any summary: the conversation's context plus the instruction."""
        span = self.prepared_span()
        if span is None:
            return None
        raw = span
        session = self.driver.session
        if session.statements:
            # as the ladder will ask it (`ask_summary`): without the statements the fold carries
            span = session.summarizable(span)
            if not span:
                return None
        ids = tuple(m.id for m in span)
        tokens = sum(m.tokens for m in span)
        raw_ids = tuple(m.id for m in raw)
        request = Summarize(tuple(span), self.driver.policy_context().settings.summary_budget(tokens))
        if self.prepared is not None and self._same_messages(self.prepared, raw_ids):
            # the same messages: what the ledger carries of them may have moved (the pins' budget
            # binds differently as statements come), the summary of them has not
            if self.driver.meter.request_no > self.prepared_at:
                await self.warm(self.prepared, request)
            return self.prepared
        summary = await self.driver.summary_for(request)
        if summary.error or not summary.text:
            return None
        why = check_summary(summary, span_tokens=tokens, count=session.count, span=span)
        if why is not None:
            # refused now as it would be at the trigger: the fallback's summary is prepared instead (fitted to
            # the budget the ladder gives it), and the context the fold leaves with it is sent ahead while the
            # user reads. At the trigger it was new text with the ledger after it: 1,421 tokens read on llama.cpp
            fallback = FALLBACKS[0]
            budget = self.driver.policy_context().settings.summary_budget(sum(m.tokens for m in raw))
            text = fit_budget(fallback.summarize(span), budget, session.count)
            summary = Summary(text=text, by=f"{fallback.name} ({summary.by}'s refused: {why})")
        self.prepared_at = self.driver.meter.request_no
        self.prepared = PreparedFold(ids, tokens, summary, raw_ids, sum(m.tokens for m in raw))
        if self._ledger_text(self.prepared) is not None or summary.asked is None:
            # the statements the fold will carry (and a fallback's summary) are new tokens: read them now
            await self.warm(self.prepared, request)
        if self.driver.on_prepared is not None:
            self.driver.on_prepared(self.prepared)
        return self.prepared

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
        summarizer = self.driver.summarizer
        asked = prepared.summary.asked
        if not isinstance(summarizer, ModelSummarizer):
            return
        context, items = self.summary_context(request, summarizer)
        if context is None or not asks_apart(context):
            return
        session = self.driver.session
        text = prepared.summary.text
        ledger = self._ledger_text(prepared)
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
            items = items[:-1]  # no instruction is sent
            summary_items = [(note_key(content), session.sent_tokens(session.make_message("system", content)))]
            summary_messages = [{"role": "user", "content": f"[context note]\n{content}"}]
        ledger_item = (ledger_key(tag), session.sent_tokens(session.make_message("system", ledger))) if ledger else None
        tail_items = [*summary_items, *([ledger_item] if ledger_item is not None else [])]
        fits = session.head_tokens + sum(t for _, t in [*items, *tail_items]) + 1 + FIT_MARGIN <= self.driver.budget_window()
        if fits:
            messages = [*context.messages, *summary_messages]
            items = [*items, *tail_items]
        elif self._folds_after_with_prompt_cache():
            messages, items = self._post_fold(prepared, asked)
            messages += summary_messages
            items += tail_items
            self.driver.placement.expect_prompt_cache = True
        else:
            return
        if note is not None:
            messages.append({"role": "user", "content": note})
        self.warmed_ledger = ledger
        options = {**context.options, **summarizer.options, "max_tokens": 1}
        at = session.clock()
        usage: Usage | None = None
        try:
            async for chunk in summarizer.model.stream(messages, tools=context.tools, options=options):
                if isinstance(chunk, Usage):
                    usage = chunk
        except ModelError:
            return
        rent = self.driver.rent
        predicted = None
        if rent is not None:
            predicted = rent.request(items, session.head_tokens, at, 0, aside=True)
        self.prepared_at = self.driver.meter.request_no + 1
        self.driver.meter.record(predicted, usage, "summary")

    def _folds_after_with_prompt_cache(self) -> bool:
        keeper, rent = self.driver.placement, self.driver.rent
        return (
            keeper is not None
            and keeper.state.placement == "after"
            and rent is not None
            and rent.sheet.reuses_shifted_kv
            and rent.sheet.prompt_cache
        )

    def _post_fold(self, prepared: PreparedFold, asked: str | None) -> tuple[list[dict[str, Any]], list[Item]]:
        """The wire messages and rent items of the context the prepared fold leaves, up to its summary
        (placed after the kept messages), the instruction's item last (when the model's summary answers one)."""
        session = self.driver.session
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
        session = self.driver.session
        if not prepared.raw_ids or any(i not in session for i in prepared.raw_ids):
            return None
        ctx = self.driver.policy_context()
        try:
            record = prepare_fold(
                session,
                list(prepared.raw_ids),
                summary=prepared.summary.text,
                summarizer_name=prepared.summary.by,
                guard=self.driver.policy.guard_for(ctx),
                position=ctx.settings.fold_placement,
                header=LADDER_HEADER,
            )
        except SessionError:
            return None  # one of them was pinned since: the fold at the trigger will not take this span
        return record.summary.content

    def _ledger_text(self, prepared: PreparedFold) -> str | None:
        """The ledger message the fold of this span will carry (core makes it the same way), or None."""
        session = self.driver.session
        if not session.statements or not prepared.raw_ids:
            return None
        carried = session.carried_by([session.get(i) for i in prepared.raw_ids if i in session])
        return ledger_rules.ledger_text(carried) if carried else None

    def prepared_summary(self, request: Summarize) -> Summary | None:
        """The prepared summary, when it covers the start of the asked span as it still is: the
        messages after it (the trigger came a message or two later than planned) are added in the
        extractive summarizer's words, which costs no request. None when it does not fit."""
        prepared = self.prepared
        if prepared is None:
            return None
        self.prepared = None
        if self.driver.on_prepared is not None:
            self.driver.on_prepared(None)
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
        return Summary(text=text, by=f"{prepared.summary.by}, prepared", asked=prepared.summary.asked)

    def _same_messages(self, prepared: PreparedFold, raw_ids: tuple[str, ...]) -> bool:
        """Whether `raw_ids` are the messages the prepared summary was written of, unedited since."""
        session = self.driver.session
        if not prepared.raw_ids or raw_ids != prepared.raw_ids or any(i not in session for i in raw_ids):
            return False
        return sum(session.get(i).tokens for i in raw_ids) == prepared.raw_tokens

    async def summary_for(self, request: Summarize) -> Summary:
        await save_before_fold(self.driver.slots)
        summarizer = self.driver.summarizer
        if isinstance(summarizer, ModelSummarizer):
            session = self.driver.session
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
            rent = self.driver.rent
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
            self.driver.meter.record(predicted, usage, "summary")
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
        session = self.driver.session
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
        tools = self.driver.offered_tools() if self.driver.offered_tools is not None else None
        options = self.driver.request_options() if self.driver.request_options is not None else {}
        context, items = self._context(session, entries, ends, ids, tools, options)
        instruction_tokens = session.sent_tokens(session.make_message("user", aligned_instruction_probe(request)))
        room = self.driver.budget_window() - (session.head_tokens + sum(t for _, t in items) + instruction_tokens)
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
                # still the cached one, and the instruction follows as a message of its own (appended to
                # the span's last message, a user's, that message was read again: 250 of 382 tokens on
                # llama.cpp). A template that refuses two user messages in a row gets them joined
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
        rent = self.driver.rent
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
        rent, session = self.driver.rent, self.driver.session
        record = session.folds[-1] if session.folds else None
        if rent is None or record is None or record.summary.id not in session:
            return
        asked = record.summary.meta.get("asked")
        if isinstance(asked, str):
            tag, keys = asked, [asked_key(asked), answer_key(asked)]
        else:
            # a prepared fallback's summary sent ahead as a context note (`warm`)
            tag = f"note:{record.summary.content}"
            keys = [note_key(record.summary.content)]
        summary = context_item(session, session.get(record.summary.id))
        if record.ledger is not None and record.ledger.id in session:
            # a prepared fold sent its ledger after the pair too (`warm`): the same tokens when the fold carries
            # the same statements (the user's next message may have corrected one since: then it is read again)
            ledger = context_item(session, session.get(record.ledger.id))
            if record.ledger.content != self.warmed_ledger:
                ledger = (ledger_key(tag), ledger[1])
            if rent.rename([*keys, ledger_key(tag)], [summary, ledger]):
                return
        rent.rename(keys, [summary])

    @staticmethod
    def _cut(session: Any, entries: list[tuple[str | None, Any]], visible: list[Message], end_index: int) -> tuple[int, int]:
        """(wire entries, visible messages) before session message `end_index`."""
        before = {m.id for m in session.messages[:end_index]}
        n_entries = sum(1 for owner, _ in entries if owner is None or owner in before)
        n_visible = sum(1 for m in visible if m.id in before)
        return n_entries, n_visible

    def _context(
        self,
        session: Any,
        entries: list[tuple[str | None, Any]],
        ends: tuple[int, int],
        ids: set[str],
        tools: Any,
        options: Any,
    ) -> tuple[SummaryContext, list[Item]]:
        n_entries, n_visible = ends
        messages = [entry for _, entry in entries[:n_entries]]
        positions = tuple(i for i, (owner, _) in enumerate(entries[:n_entries]) if owner in ids)
        items = context_items(session)[:n_visible]
        later = [entry for _, entry in entries[n_entries:]]
        context = SummaryContext(messages=messages, positions=positions, tools=tools or None, options=options, later=later)
        return context, items

    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]:
        """What applying this fold costs the next request: the tokens it reads again (the rent
        model's prediction of the folded context: in place, what follows the summary; after the
        kept messages on an engine that shifts KV, the summary), and their seconds at the
        measured rate."""
        session = self.driver.session
        span = set(record.span_ids)
        rent = self.driver.rent
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
        session = self.driver.session
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
        rent = self.driver.rent
        kept = rent is not None and rent.prompt_cache_gain(items, session.head_tokens, session.clock()) > 0
        return tokens, seconds, kept

    def _reread(self, items: list[Item]) -> tuple[int, float | None]:
        session = self.driver.session
        rent = self.driver.rent
        if rent is None:
            return session.head_tokens + sum(t for _, t in items), None
        context, cached, _ = rent.predict(items, session.head_tokens, session.clock())
        tokens = context - cached
        rate = prompt_rate(session.usage, rent.sheet)
        return tokens, (rate.seconds(tokens) if rate is not None and rate.measured else None)
