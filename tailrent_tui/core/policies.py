"""Policies: what a session does with its context as messages arrive.

Every policy gets tool results through the same two cheap rungs (`admit_tool`):
rung 1 caps the text (`tool_max_lines`), rung 2 spills it when it is over
`spill_threshold` tokens. They differ in what happens after each message is
added (`after_add`) and before each request (`before_request`), which is told
whether the cache expired (a resume after an idle gap):

- `none`: never folds and ignores the window; its rent is charged with a cache
  that never expires, so every new token is evaluated exactly once: the floor.
- `naive`: the article's harness. Its budget is `fold_trigger x window` (the
  article budgets a tail of 900 estimated tokens; here every policy starts
  worrying at the same point, so they differ only in what they do then). Over
  budget after an add, it folds the oldest 6 unpinned messages into a summary
  inserted at index 0, at most once per added message, guard "report" (facts
  lost are counted, not repaired). No auto-pin; user pins are honoured.
- `naive-pin`: `naive` with decisions pinned on arrival (the article's fix).
- `autocompact`: at 83.5% of the window, fold everything but the most recent
  messages (about 20k tokens, or 15% of the window if smaller) into one summary
  at the front; no auto-pin, guard "report".
- `ladder`: decisions pinned on arrival; past `fold_trigger x window`, first
  re-spill big inline tool results, then if still over, one fold in place down
  to `fold_target x window` with guard "repair". At a resume after the cache
  expired (the whole context is rewritten anyway) it folds down to
  `resume_fold_target x window` (15%, at most the fold target), so the rewrite
  is small, the turns after it read a small prefix, and the fold costs nothing
  extra.

Policies are plans (DESIGN.md): a policy never calls a summarizer and never
awaits. Each step (`after_add`, `before_request`, `fold_by_hand`) is a
generator that decides what to do, yields `Summarize(span, budget)` when it
needs a summary, is sent a `Summary` back, and returns the events it emitted.
`run_plan` below is core's synchronous driver (the bench's `--driver core`,
tests); the agent has the one asynchronous driver (the app, `ask`, the demo,
manual folds, the bench's `--driver agent`). No path holds a copy of the ladder.

Under `ladder` a fold always shrinks: a summary is checked (`check_summary`)
and replaced by the extractive one when unusable, and a fold that would still
not make the context smaller is not applied; the ladder spills the oversized
messages of the span instead (rung 2, lossless), or takes a longer span, and
says so. Before each request (`before_request`) the ladder also makes the
context fit the window with room for the reply, spilling a message that
cannot fit at all. The baselines (`naive`, `autocompact`) keep their
harnesses' behaviour: whatever the summarizer writes is folded.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from tailrent_tui.core.ledger import ledger_text
from tailrent_tui.core.messages import Event, FoldRecord, Kind, Message
from tailrent_tui.core.ports import FoldArchive, SpillStore
from tailrent_tui.core.rungs.fold import (
    GuardMode,
    Position,
    apply_fold,
    fold_ledger,
    nothing_reason,
    oldest_unpinned,
    prepare_fold,
    retire_summaries,
    skip_fold,
    span_messages,
    span_to_target,
)
from tailrent_tui.core.rungs.spill import admit_tool_result, spill_gain, try_spill
from tailrent_tui.core.rungs.truncate import truncate_text
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import (
    ExtractiveSummarizer,
    LossySummarizer,
    Review,
    Summarize,
    Summarizer,
    Summary,
    Verdict,
    check_edit,
    check_summary,
    cut_to_budget,
    fit_budget,
)

#: A policy step: yields Summarize requests (sent Summary answers) and, when the
#: settings ask for a fold preview, Review requests (sent a Verdict); returns its events.
Plan = Generator[Summarize | Review, Summary | Verdict, list[Event]]
#: a policy's steps inside a plan: they ask as a plan does, and the plan collects the events (`_captured`)
Steps = Generator[Summarize | Review, Summary | Verdict, None]


class UnknownPolicy(ValueError):
    """A policy name this build does not know."""


@dataclass(frozen=True)
class ResumeFold:
    """What a policy's fold at a cold resume is expected to do (`Policy.cold_resume_fold`)."""

    #: about how many tokens the context holds after it: what the first request re-reads
    after: int
    #: about how many tokens the fold takes: what a model summarizer reads first
    span_tokens: int
    #: the summary's budget: at most what a model summarizer writes
    summary_tokens: int


#: at a resume after the cache expired, the ladder folds down to this share of the window (at most the
#: fold target): the whole prefix is rewritten anyway, so the deeper fold costs no extra re-evaluation
RESUME_FOLD_TARGET = 0.15


class PolicySettings(BaseModel):
    """Budget settings shared by all policies (DESIGN.md, "The context window")."""

    window: int = Field(default=32768, gt=0)
    fold_trigger: float = Field(default=0.9, gt=0, le=1)
    fold_target: float = Field(default=0.35, gt=0, le=1)
    resume_fold_target: float = Field(
        default=RESUME_FOLD_TARGET,
        gt=0,
        le=1,
        description="at a resume after the cache expired, the ladder folds down to this share of the window "
        "(at most fold_target): the whole prefix is rewritten anyway, so the fold costs no extra re-evaluation",
    )
    spill_threshold: int | None = Field(default=None, ge=0, description="tokens per tool result; None: 1/16 of the window")
    keep_recent: int = Field(default=2, ge=0, description="last messages no fold may take (the turn in flight)")
    tool_max_lines: int = Field(default=2000, gt=0, description="rung 1 cap for tool results in traces")
    naive_batch: int = Field(default=6, gt=0)
    autocompact_at: float = Field(default=0.835, gt=0, le=1)
    autocompact_keep_tokens: int = Field(default=20000, ge=0)
    autocompact_keep_share: float = Field(default=0.15, ge=0, le=1)
    respill_min_tokens: int | None = Field(
        default=None, ge=0, description="inline tool results at least this big are re-spilled; None: threshold/4"
    )
    guard: GuardMode | None = Field(
        default=None, description="fold guard for every fold; None: the policy's own (ladder repairs, baselines report)"
    )
    reply_reserve: int = Field(default=0, ge=0, description="tokens kept free for the reply when fitting a request")
    summary_share: float = Field(default=0.25, gt=0, le=1, description="a summary's token budget as a share of its span")
    fold_placement: Literal["in_place", "after"] = Field(
        default="in_place",
        description="where the ladder puts a fold's summary: in the span's place (a prefix cache keeps what is "
        "before it), or after the kept messages (an engine that shifts KV keeps them too); the agent sets it "
        "from the engine it detected",
    )
    fold_turn_ends: bool = Field(
        default=False,
        description="a fold's span ends where a user message starts: llama.cpp keeps the context checkpoints of "
        "sliding-window and recurrent models there, so the next span starts on one; the agent sets it from the engine",
    )
    fold_preview: Literal["manual", "always", "never"] = Field(
        default="never",
        description="which folds are shown for review before they apply: the user's (f, /fold), every one, or none",
    )

    @property
    def spill_tokens(self) -> int:
        return self.spill_threshold if self.spill_threshold is not None else max(1, self.window // 16)

    @property
    def trigger_tokens(self) -> int:
        return int(self.window * self.fold_trigger)

    @property
    def target_tokens(self) -> int:
        return int(self.window * self.fold_target)

    @property
    def resume_tokens(self) -> int:
        return int(self.window * min(self.resume_fold_target, self.fold_target))

    @property
    def respill_tokens(self) -> int:
        if self.respill_min_tokens is not None:
            return self.respill_min_tokens
        return max(1, self.spill_tokens // 4)

    @property
    def request_limit(self) -> int:
        """The largest context that may be sent: the window less the reply's room."""
        return max(1, self.window - self.reply_reserve)

    def summary_budget(self, span_tokens: int) -> int:
        """Tokens a summary of `span_tokens` may take (the model's max_tokens)."""
        return max(32, min(int(span_tokens * self.summary_share), max(64, self.window // 8)))


def fold_goal(session: Session, settings: PolicySettings, limit: int) -> int:
    """The context a fold past `limit` aims at: the fold target, with what no fold can take (the pins, the
    ledger) on top of it, up to halfway to the limit (otherwise a ledger near the target would make every
    fold a small one). A fold prepared ahead (agent/fold_requests.py) aims at the same."""
    target = settings.target_tokens
    return max(target, min(target + session.totals.pinned, (target + limit) // 2))


@dataclass
class PolicyContext:
    """What a policy may use: where spills and fold originals go, and the settings."""

    spill_store: SpillStore | None = None
    archive: FoldArchive | None = None
    settings: PolicySettings = field(default_factory=PolicySettings)


def finished(events: list[Event] | None = None) -> Plan:
    """A plan that needs no summary."""
    return events or []
    yield  # a generator: this makes it a plan


def run_plan(plan: Plan, summarizer: Summarizer) -> list[Event]:
    """Core's synchronous driver: answers each request with `summarizer` (a review
    with "apply": nobody is there to look), returns the plan's events."""
    try:
        request = next(plan)
        while True:
            if isinstance(request, Review):
                request = plan.send(Verdict(apply=True))
            else:
                request = plan.send(Summary(text=summarizer.summarize(request.span), by=summarizer.name))
    except StopIteration as stop:
        events: list[Event] = stop.value
        return events


def _captured(session: Session, plan: Steps) -> Plan:
    """Run `plan` and return every event the session emitted meanwhile."""
    events: list[Event] = []
    session.listeners.append(events.append)
    try:
        yield from plan
    finally:
        session.listeners.remove(events.append)
    return events


def ask_summary(
    ctx: PolicyContext, span: list[Message], session: Session | None = None
) -> Generator[Summarize, Summary, Summary]:
    """Ask the driver for a summary of `span`, within the budget the settings give it.

    With a session that keeps a ledger, the summarizer sees the span without its
    statements (they are carried verbatim) and without ledger messages; a span with
    nothing else to say needs no summarizer at all."""
    ids: tuple[str, ...] = ()
    if session is not None and session.statements:
        ids = tuple(m.id for m in span)
        span = session.summarizable(span)
        if not span:
            return Summary(text="", by="ledger")
    return (yield Summarize(tuple(span), ctx.settings.summary_budget(sum(m.tokens for m in span)), ids))


#: Who writes a summary when the asked summarizer's cannot be used: the extractive
#: one keeps fact sentences verbatim. The article's lossy summarizer is never a
#: fallback (it is the article's, the demo's and the bench's): past the extractive
#: one, the ladder's last resort is to move the span whole to the archive with a
#: pointer, a loss the guard reports (`LadderPolicy._drop`).
FALLBACKS: tuple[Summarizer, ...] = (ExtractiveSummarizer(),)


def choose_fold(
    session: Session,
    span: list[Message],
    reply: Summary,
    *,
    guard: GuardMode,
    position: Position,
    header: str | None,
    trigger: str,
    fallbacks: tuple[Summarizer, ...] = FALLBACKS,
    min_gain: float = 0.0,
    budget: int | None = None,
) -> FoldRecord:
    """The guarded fold of `span` with the first summary that is usable and shrinks it.

    The reply is checked (`check_summary`) and must shrink the span once its
    header and the guard's facts are in; if not, each fallback is tried in turn,
    and the record says whose text it is and why. When none shrinks, the last
    one tried comes back: the caller applies only folds that shrink.
    `min_gain` is the share of the span a summary must save to count as shrinking it.
    `budget` is the summary's room (the model's max_tokens, planned with the span
    so that one fold reaches its target). A reply that ended on its own but
    counts past it (a summarizer that takes no budget, as the bench's do, or a
    server that counts differently) is cut to it at whole lines (`fit_budget`),
    as a model told its budget would have kept within it; so is the last
    resort's text, the guard carrying the facts it drops. The careful
    extractive fallback only has to shrink the span.
    """
    ids = [m.id for m in span]
    if session.statements:
        # the summarizers see the span without its statements (carried verbatim)
        span = session.summarizable(span)
        if not span:
            return prepare_fold(
                session,
                ids,
                summary="",
                summarizer_name="ledger",
                guard=guard,
                position=position,
                header=header,
                trigger=trigger,
                rejected=None,
                ledger_order=reply.ledger_order,
            )
    span_tokens = sum(m.tokens for m in span)

    def fold_with(text: str, by: str, rejected: str | None, asked: str | None = None) -> FoldRecord:
        return prepare_fold(
            session,
            ids,
            summary=text,
            summarizer_name=by,
            guard=guard,
            position=position,
            header=header,
            trigger=trigger,
            rejected=rejected,
            asked=asked,
            ledger_order=reply.ledger_order,
        )

    reasons: list[str] = []
    why = check_summary(reply, span_tokens=span_tokens, count=session.count, span=span)
    if why is None and budget is not None:
        fitted = fit_budget(reply.text, budget, session.count)
        if fitted != reply.text:
            reply = replace(reply, text=fitted)
    record = None
    if why is None:
        record = fold_with(reply.text, reply.by, reply.rejected, reply.asked)
        if shrinks(record, min_gain):
            return record
        why = "with its header and the guard's facts it was not smaller than the span"
    reasons.append(f"{reply.by}'s summary refused: {why}")
    for fallback in fallbacks:
        if fallback.name == reply.by and record is not None:
            continue  # its text was just tried
        text = fallback.summarize(span)
        if budget is not None and isinstance(fallback, LossySummarizer):
            text = fit_budget(text, budget, session.count)  # the last resort: cut, the guard carries the facts
        record = fold_with(text, fallback.name, "; ".join(reasons))
        if shrinks(record, min_gain):
            return record
        reasons.append(f"{fallback.name}'s was not smaller either")
    assert record is not None, "a fallback always writes a summary"
    return record


def reviewed(
    session: Session,
    ctx: PolicyContext,
    record: FoldRecord,
    span: list[Message],
    *,
    manual: bool,
    position: Position,
    header: str | None,
) -> Generator[Review, Verdict, FoldRecord | None]:
    """The fold as the user approved it, when the settings ask for a preview of
    this fold (None: cancelled); else the fold as it is.

    An edited summary is prepared again, so the guard re-checks it (facts the
    edit dropped are reported, or repaired under "repair"), and shown again."""
    mode = ctx.settings.fold_preview
    if mode == "never" or (mode == "manual" and not manual):
        return record
    note: str | None = None
    while True:
        verdict = yield Review(record, tuple(span), note=note)
        if not verdict.apply:
            return None
        if verdict.text is None:
            return record
        why = check_edit(verdict.text)
        note = f"your edit was not used: {why}" if why else None
        if why:
            continue  # the fold as it was, shown again with why
        record = prepare_fold(
            session,
            record.span_ids,
            summary=verdict.text,
            summarizer_name="you (edited)",
            guard=cast(GuardMode, record.guard),
            position=position,
            header=header,
            trigger=record.trigger,
            ledger_order=record.carried,  # the ledger as the preview showed it
        )


def shrinks(record: FoldRecord, min_gain: float = 0.0) -> bool:
    """Does the fold make its span smaller, by at least `min_gain` of it?"""
    return record.tokens_after < record.tokens_before and record.tokens_after <= record.tokens_before * (1.0 - min_gain)


def _content_messages(session: Session) -> list[Message]:
    """Unpinned messages whose content could move to a spill (rung 2)."""
    return [m for m in session.messages if not m.pinned and not m.cut_off and m.kind in (Kind.chat, Kind.tool_result)]


class Policy:
    """Base policy: rungs 1 and 2 on entry, nothing after."""

    name = "base"
    description = ""
    autopin = False
    #: statements are kept in the ledger and carried verbatim through folds (core/ledger.py)
    ledger = False
    #: rent for this policy is charged with a cache that never expires (the floor)
    infinite_ttl = False
    #: the guard when the settings leave it to the policy
    guard: GuardMode = "report"
    #: where a fold's summary goes, and its first line
    position: Position = "front"
    header: str | None = None

    def decision_detector(self) -> Any | None:
        """The detector to give the Session (auto-pin), or None."""
        if not self.autopin:
            return None
        from tailrent_tui.core.guard import DecisionDetector

        return DecisionDetector()

    def guard_for(self, ctx: PolicyContext) -> GuardMode:
        return ctx.settings.guard or self.guard

    def placement(self, ctx: PolicyContext) -> Position:
        """Where this policy's folds put their summary (the baselines: their harness's place)."""
        return self.position

    def admit_tool(
        self,
        session: Session,
        ctx: PolicyContext,
        tool: str,
        content: str,
        *,
        tool_call_id: str | None = None,
        at: float | None = None,
    ) -> Message:
        """Rung 1 (cap the lines) then rung 2 (spill over the threshold); the same for every policy."""
        capped = truncate_text(
            content,
            max_lines=ctx.settings.tool_max_lines,
            label=f"{tool} output",
            how_to_get_more="ask for a narrower range",
        )
        if ctx.spill_store is None:
            m = session.make_message("tool", capped.text, kind=Kind.tool_result, tool=tool, tool_call_id=tool_call_id, at=at)
            return session.add_message(m, autopin=False)
        return admit_tool_result(
            session,
            tool,
            capped.text,
            ctx.spill_store,
            threshold=ctx.settings.spill_tokens,
            tool_call_id=tool_call_id,
            at=at,
        )

    def after_add(self, session: Session, ctx: PolicyContext) -> Plan:
        """After each message is added."""
        return finished()

    def before_request(self, session: Session, ctx: PolicyContext, *, expired: bool) -> Plan:
        """Before each model request; `expired` says the cache is gone (a resume after an idle gap)."""
        return finished()

    def cold_resume_fold(self, session: Session, ctx: PolicyContext) -> ResumeFold | None:
        """What this policy's fold before the first request after a resume whose cache
        expired is expected to do; None when it does not fold then."""
        return None

    def cold_resume_tokens(self, session: Session, ctx: PolicyContext) -> int | None:
        """About how many tokens the first request carries after a resume whose cache
        expired, when this policy folds before it; None when it does not fold then."""
        fold = self.cold_resume_fold(session, ctx)
        return fold.after if fold is not None else None

    def fold_by_hand(self, session: Session, ctx: PolicyContext, span_ids: list[str] | None, trigger: str = "manual") -> Plan:
        """The user's fold (`f`, `/fold`): the given span, else down to the fold target,
        else everything foldable. It is applied only if it shrinks the context."""
        return _captured(session, self._fold_by_hand(session, ctx, span_ids, trigger))

    def _fold_by_hand(self, session: Session, ctx: PolicyContext, span_ids: list[str] | None, trigger: str) -> Steps:
        if span_ids is None:
            span_ids = span_to_target(
                session, ctx.settings.target_tokens, keep_recent=ctx.settings.keep_recent, turn_ends=ctx.settings.fold_turn_ends
            )
            if not span_ids:
                span_ids = [
                    m.id
                    for m in session.messages[: -ctx.settings.keep_recent or None]
                    if not m.pinned and m.kind is not Kind.fold_summary
                ]
        # depth one: a summary in a marked span stays as it is, the messages around it fold
        summaries = {m.id for m in session.messages if m.kind is Kind.fold_summary}
        span_ids = [i for i in span_ids if i not in summaries]
        if not span_ids:
            skip_fold(
                session,
                "nothing to fold: a fold summary is never folded again (depth one); /unfold it instead"
                if summaries
                else nothing_reason(session),
                trigger,
            )
            return
        span = span_messages(session, span_ids)
        reply = yield from ask_summary(ctx, span, session)
        record = choose_fold(
            session,
            span,
            reply,
            guard=self.guard_for(ctx),
            position=ctx.settings.fold_placement,
            header=LADDER_HEADER,
            trigger=trigger,
            budget=ctx.settings.summary_budget(sum(m.tokens for m in span)),
        )
        if record.tokens_after >= record.tokens_before:
            skip_fold(session, _would_grow(record), trigger)
            return
        approved = yield from reviewed(
            session, ctx, record, span, manual=True, position=ctx.settings.fold_placement, header=LADDER_HEADER
        )
        if approved is None:
            return  # cancelled in its preview: nothing happened
        if approved.tokens_after >= approved.tokens_before:
            skip_fold(session, _would_grow(approved), trigger)
            return
        apply_fold(session, approved, ctx.archive)


def _refused_in_this_fold(reply: Summary, session: Session, span: list[Message]) -> Summary | None:
    """The answer to give instead of asking the same summarizer again in this fold, when its
    summary was refused (None: it was usable, ask again)."""
    why = check_summary(reply, span_tokens=sum(m.tokens for m in span), count=session.count, span=span)
    if why is None:
        return None
    return Summary(text="", by=reply.by, error=f"not asked again in this fold: its first summary was refused ({why})")


def _would_grow(record: FoldRecord, min_gain: float = 0.0) -> str:
    smaller = f"at least {min_gain:.0%} smaller" if min_gain else "smaller"
    return (
        f"nothing folded: the summary of {len(record.span_ids)} message{'s' if len(record.span_ids) != 1 else ''} "
        f"({record.tokens_after:,} tokens) would not be {smaller} than the span ({record.tokens_before:,} tokens)"
    )


class NonePolicy(Policy):
    name = "none"
    description = "truncate and spill only; never folds; cache never expires (the floor)"
    infinite_ttl = True


class NaivePolicy(Policy):
    name = "naive"
    description = "the article's harness: over budget, fold the oldest 6 at index 0, once per add"
    header: str | None = "[folded {n} messages]"

    def after_add(self, session: Session, ctx: PolicyContext) -> Plan:
        s = ctx.settings
        if session.context_tokens <= s.trigger_tokens:
            return finished()
        span = oldest_unpinned(session, s.naive_batch)
        if not span:
            return finished()
        return self._fold_front(session, ctx, span)

    def _fold_front(self, session: Session, ctx: PolicyContext, span_ids: list[str]) -> Plan:
        # As the harness it reproduces: whatever the summarizer writes is folded.
        span = span_messages(session, span_ids)
        reply = yield from ask_summary(ctx, span)
        if reply.error is not None:
            raise RuntimeError(reply.error)
        # its summary request had a max_tokens, as a model's does: a mock's text is cut there too (the
        # extractive mock keeps every fact sentence of the summary it refolds, which grew without end)
        text = cut_to_budget(reply.text, ctx.settings.summary_budget(sum(m.tokens for m in span)), session.count)
        record = prepare_fold(
            session,
            span_ids,
            summary=text,
            summarizer_name=reply.by,
            guard=self.guard_for(ctx),
            position=self.position,
            header=self.header,
            trigger=self.name,
        )
        return [apply_fold(session, record, ctx.archive)]


class NaivePinPolicy(NaivePolicy):
    name = "naive-pin"
    description = "naive, with decisions pinned on arrival (the article's fix)"
    autopin = True


class AutocompactPolicy(NaivePolicy):
    name = "autocompact"
    description = "at 83.5% of the window, fold all but the recent ~20k tokens into one summary"
    header = None

    def keep_tokens(self, s: PolicySettings) -> int:
        return min(s.autocompact_keep_tokens, int(s.window * s.autocompact_keep_share))

    def after_add(self, session: Session, ctx: PolicyContext) -> Plan:
        s = ctx.settings
        if session.context_tokens < int(s.window * s.autocompact_at):
            return finished()
        # the most recent messages up to the keep budget stay; everything before is folded
        keep = self.keep_tokens(s)
        msgs = session.messages
        kept = 0
        cut = len(msgs)
        while cut > 0 and kept + msgs[cut - 1].tokens <= keep:
            cut -= 1
            kept += msgs[cut].tokens
        cut = min(cut, max(0, len(msgs) - s.keep_recent))
        span = [m.id for m in msgs[:cut] if not m.pinned]
        if not span:
            return finished()
        return self._fold_front(session, ctx, span)


# No numbers in the header: the guard would take "#3" or "18 messages" for facts
# and carry them verbatim through every later fold of this summary.
LADDER_HEADER = "[fold summary]"


class LadderPolicy(Policy):
    name = "ladder"
    description = (
        "truncate, spill, a ledger of statements kept verbatim; past the trigger re-spill, "
        "then one fold of depth one to the target, guarded"
    )
    autopin = True
    ledger = True
    guard: GuardMode = "repair"
    position: Position = "in_place"
    header = LADDER_HEADER

    def placement(self, ctx: PolicyContext) -> Position:
        return ctx.settings.fold_placement

    #: folds allowed in one step when a summary comes out bigger than hoped
    max_passes = 3
    #: a second or third pass must save this share of its span: one that saves a few
    #: tokens costs a summary request and more specifics for nothing
    min_gain = 0.1
    #: a later pass whose span is smaller than this asks no summary: its request reads more than it can save
    #: (on llama.cpp a second pass asked the summary of one 8-token reply and read 603 tokens)
    min_pass_tokens = 128

    def respill(self, session: Session, ctx: PolicyContext, target: int) -> None:
        """Re-spill big inline tool results, oldest first, until the context is at the target."""
        if ctx.spill_store is None:
            return
        floor = ctx.settings.respill_tokens
        for m in list(session.messages):
            if session.context_tokens <= target:
                break
            if m.kind == Kind.tool_result and not m.pinned and m.tokens >= floor and spill_gain(session, m) > 0:
                try_spill(session, m.id, ctx.spill_store)

    def spill_oversized(self, session: Session, ctx: PolicyContext, candidates: list[Message], limit: int, why: str) -> int:
        """Spill the biggest of `candidates` (user messages too) until the context is at `limit`.

        Only a spill that at least halves a message is worth its read_spill later.
        Returns how many were spilled; each is noted for the user.
        """
        if ctx.spill_store is None:
            return 0
        done = 0
        for m in sorted(candidates, key=lambda m: -m.tokens):
            if session.context_tokens <= limit:
                break
            if m.id not in session or spill_gain(session, m) * 2 < m.tokens:
                continue
            ev = try_spill(session, m.id, ctx.spill_store)
            if ev is None:
                continue
            done += 1
            session.note(
                f"{why}: the {m.role} message of {ev.tokens_before:,} tokens went to a spill file; "
                f"the context keeps a {ev.pointer_tokens:,}-token pointer with a preview (read_spill brings it back)",
                "warning",
            )
        return done

    def _fold_to(self, session: Session, ctx: PolicyContext, target: int, trigger: str) -> Steps:
        """Fold down to the target in one step, and only with folds that shrink.

        The span is taken large enough for its expected summary (a quarter of
        it: the model's budget), so that one pass usually reaches the target.
        The summary's size is only known after summarizing, so when a pass
        leaves the context above the target, another pass folds again (now
        taking the new summary too). All passes happen before the next request,
        so the cache is invalidated once, from the first span's position.
        When no careful summary shrinks the span, its big messages are spilled
        (rung 2 loses nothing); only then does the lossy summary, with the
        guard carrying the facts, get a turn, over the span or a longer one.
        A summarizer whose summary was refused is not asked again in the same
        fold: on a small local model each refused request is tens of seconds,
        and the fallbacks write the later passes.
        """
        keep = ctx.settings.keep_recent
        refused: Summary | None = None

        def summary_of(span: list[Message]) -> Generator[Summarize, Summary, Summary]:
            if refused is not None:
                return refused
            return (yield from ask_summary(ctx, span, session))

        applied = False
        for pass_no in range(self.max_passes):
            # the first pass must only shrink; a later one is a refinement toward the
            # target, worth its summary request only if it saves a real share
            gain = self.min_gain if pass_no else 0.0
            span_ids = span_to_target(
                session, target, keep_recent=keep, summary_share=ctx.settings.summary_share, turn_ends=ctx.settings.fold_turn_ends
            )
            if not span_ids:
                # depth one: what is left to take is summaries; the oldest leave for pointers
                if not retire_summaries(session, target, keep_recent=keep, position=self.placement(ctx)) and not pass_no:
                    skip_fold(session, nothing_reason(session), trigger)
                return
            span = span_messages(session, span_ids)
            if sum(m.tokens for m in span) < self.min_pass_tokens:
                if applied:
                    return
                # A span this small is all the raw text left to take (the rest is summaries and pins): no
                # summary of it can save what its request costs (on llama.cpp an 8-token reply was asked of
                # SmolLM2 twice a turn, 65 and 300 tokens read, 32 written, refused). Depth one: the oldest
                # summaries leave for a pointer instead; the span is asked only when none can.
                if retire_summaries(session, target, keep_recent=keep, position=self.placement(ctx)):
                    return
            reply = yield from summary_of(span)
            refused = refused or _refused_in_this_fold(reply, session, span)
            record = self._choose(session, ctx, span, reply, trigger, FALLBACKS[:1], gain)
            if not shrinks(record, gain):
                content = [m for m in span if m.kind in (Kind.chat, Kind.tool_result)]
                spilled = self.spill_oversized(session, ctx, content, target, "a fold of it would not shrink the context")
                if spilled and (session.context_tokens <= target or pass_no < self.max_passes - 1):
                    continue
                record = self._choose(session, ctx, span, reply, trigger, FALLBACKS, gain)
            if not shrinks(record, gain):
                wider = [
                    m
                    for m in session.messages[: max(0, len(session.messages) - keep)]
                    if not m.pinned and m.kind is not Kind.fold_summary and not m.cut_off
                ]
                if len(wider) > len(span):
                    reply = yield from summary_of(wider)
                    record = self._choose(session, ctx, wider, reply, trigger, FALLBACKS, gain)
            if not shrinks(record, gain):
                if applied:
                    return  # a pass folded: a refinement that saves too little is not worth it
                # Nothing written shrinks the span: it leaves for the archive with a pointer, and
                # the guard reports what that loses. The ladder never stops folding for a summary.
                record = self._drop(session, ctx, span_messages(session, record.span_ids), trigger)
                if not shrinks(record):
                    skip_fold(session, _would_grow(record), trigger)
                    return
            approved = yield from reviewed(
                session,
                ctx,
                record,
                span_messages(session, record.span_ids),
                manual=False,
                position=self.placement(ctx),
                header=self.header,
            )
            if approved is None:
                skip_fold(session, "the fold was cancelled in its preview", trigger)
                return
            if not shrinks(approved):
                skip_fold(session, _would_grow(approved), trigger)
                return
            apply_fold(session, approved, ctx.archive)
            applied = True
            if session.context_tokens <= target:
                return

    def _drop(self, session: Session, ctx: PolicyContext, span: list[Message], trigger: str) -> FoldRecord:
        """The span out of the context, for a pointer to the archive: the fold of last resort.

        Its statements are carried into the ledger as in any fold; the guard reports the
        facts it loses (it repairs nothing: a repaired pointer would not shrink)."""
        pointer = (
            f"{len(span)} earlier message{'s' if len(span) != 1 else ''} left the context whole, unsummarized: "
            "search_history or /unfold brings them back"
        )
        record = prepare_fold(
            session,
            [m.id for m in span],
            summary=pointer,
            summarizer_name="dropped",
            guard="report",
            position=self.placement(ctx),
            header=self.header,
            trigger=trigger,
            rejected="no summary of the span was smaller than it",
        )
        return record.model_copy(update={"dropped": True})

    def _choose(
        self,
        session: Session,
        ctx: PolicyContext,
        span: list[Message],
        reply: Summary,
        trigger: str,
        fallbacks: tuple[Summarizer, ...],
        gain: float,
    ) -> FoldRecord:
        return choose_fold(
            session,
            span,
            reply,
            guard=self.guard_for(ctx),
            position=self.placement(ctx),
            header=self.header,
            trigger=trigger,
            fallbacks=fallbacks,
            min_gain=gain,
            budget=ctx.settings.summary_budget(sum(m.tokens for m in span)),
        )

    def _shrink(self, session: Session, ctx: PolicyContext, limit: int, trigger: str, target: int | None = None) -> Steps:
        """Past `limit`: re-spill big inline results, then if still past it, fold to the
        target (the fold target unless told another)."""
        if session.context_tokens <= limit:
            return
        if target is None:
            target = fold_goal(session, ctx.settings, limit)
        self.respill(session, ctx, target)
        if session.context_tokens > limit:
            yield from self._fold_to(session, ctx, target, trigger)

    def _fit(self, session: Session, ctx: PolicyContext) -> Steps:
        """Make the request fit the window with room for the reply, or leave it to the caller to refuse.

        A newest message that cannot fit even alone is spilled first: folding
        the rest would not make room for it. Then the usual shrink; then, if
        still over, the biggest unpinned messages are spilled.
        """
        limit = ctx.settings.request_limit
        if session.context_tokens <= limit:
            return
        newest = _content_messages(session)[-1:]
        if newest and session.head_tokens + newest[0].tokens > limit:
            self.spill_oversized(session, ctx, newest, limit, "too big for the window")
        yield from self._shrink(session, ctx, limit, "ladder: the request would not fit the window")
        if session.context_tokens > limit:
            self.spill_oversized(session, ctx, _content_messages(session), limit, "the request would not fit the window")
        if session.context_tokens > limit:
            retire_summaries(session, limit, keep_recent=ctx.settings.keep_recent, position=self.placement(ctx))
        if session.context_tokens > limit:
            # the ledger's messages merged into one: each paid its own heading (nothing is lost)
            self._fold_ledger(session, ctx, session.context_tokens - limit, release=False)
        if session.context_tokens > limit:
            # what is left unpinned goes whole to the archive: never an over-window request
            keep = ctx.settings.keep_recent
            rest = [
                m
                for m in session.messages[: max(0, len(session.messages) - keep)]
                if not m.pinned and m.kind is not Kind.fold_summary and not m.cut_off
            ]
            if rest:
                record = self._drop(session, ctx, rest, "ladder: the request would not fit the window")
                if shrinks(record):
                    apply_fold(session, record, ctx.archive)
        if session.context_tokens > limit:
            # the ledger alone crowds the request (a long system prompt in a small window): its lowest-ranked
            # statements leave for the archive, said lost, rather than a request the server refuses
            self._fold_ledger(session, ctx, session.context_tokens - limit, release=True)

    def _fold_ledger(self, session: Session, ctx: PolicyContext, excess: int, *, release: bool) -> None:
        record = fold_ledger(session, excess, header=self.header, release=release, keep_recent=ctx.settings.keep_recent)
        if record is not None and shrinks(record):
            apply_fold(session, record, ctx.archive)

    def after_add(self, session: Session, ctx: PolicyContext) -> Plan:
        session.reply_reserve = ctx.settings.reply_reserve  # the pins' budget leaves the reply its room
        if session.context_tokens <= ctx.settings.trigger_tokens:
            return finished()
        return _captured(session, self._shrink(session, ctx, ctx.settings.trigger_tokens, "ladder: past the fold trigger"))

    def before_request(self, session: Session, ctx: PolicyContext, *, expired: bool) -> Plan:
        session.reply_reserve = ctx.settings.reply_reserve
        return _captured(session, self._before_request(session, ctx, expired))

    def cold_resume_fold(self, session: Session, ctx: PolicyContext) -> ResumeFold | None:
        context = session.context_tokens
        resume = ctx.settings.resume_tokens
        if context <= resume:
            return None
        # no fold takes the head, a pin or the last keep_recent messages; what it takes
        # leaves a summary of about its budget behind
        keep = ctx.settings.keep_recent
        recent = session.messages[-keep:] if keep else []
        recent_ids = {m.id for m in recent}
        kept = session.head_tokens + sum(m.tokens for m in recent)
        kept += sum(m.tokens for m in session.messages if m.pinned and m.id not in recent_ids)
        foldable = context - kept
        if foldable <= 0:
            return None
        # the span's statements that a fold carries into the ledger stay too, verbatim
        span = [m for m in session.messages if not m.pinned and m.id not in recent_ids and m.kind is not Kind.fold_summary]
        carried = session.carried_by(span) if session.statements and span else []
        held = session.count(ledger_text(carried)) if carried else 0
        kept += held
        # the summarizer is shown the span without them: its budget is of what is left
        budget = ctx.settings.summary_budget(max(0, foldable - held))
        after = max(resume, kept + budget)
        return ResumeFold(after=after, span_tokens=foldable, summary_tokens=budget) if after < context else None

    def _before_request(self, session: Session, ctx: PolicyContext, expired: bool) -> Steps:
        if expired:
            # The cache is gone: the whole context is rewritten on this request anyway,
            # so a fold now costs no extra re-evaluation. It goes deeper than a fold at the
            # trigger (the resume target): every token kept is written again now and read
            # on every turn after; pins, pointers and the guard's facts stay either way.
            resume = ctx.settings.resume_tokens
            yield from self._shrink(session, ctx, resume, "ladder: resume after the cache expired", target=resume)
        yield from self._fit(session, ctx)


POLICIES: dict[str, type[Policy]] = {
    p.name: p for p in (NonePolicy, NaivePolicy, NaivePinPolicy, AutocompactPolicy, LadderPolicy)
}
POLICY_NAMES = tuple(POLICIES)


def get_policy(name: str) -> Policy:
    """A fresh policy by name (none, naive, naive-pin, autocompact, ladder)."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise UnknownPolicy(f"unknown policy {name!r}: choose one of {', '.join(POLICY_NAMES)}") from None
