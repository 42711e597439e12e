"""Policies: what a session does with its context as messages arrive.

Every policy gets tool results through the same two cheap rungs (`admit_tool`):
rung 1 caps the text (`tool_max_lines`), rung 2 spills it when it is over
`spill_threshold` tokens. They differ in what happens after each message is
added (`after_add`) and at a resume after the cache expired (`on_resume`):

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
  expired (the whole context is rewritten anyway) it folds down to the target
  if it is above it, so the rewrite is small and the fold costs nothing extra.

Policies only call core rungs; the runner (scenarios/bench.py) or the agent
supplies the summarizer, spill store and archive through `PolicyContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from tailrent_tui.core.messages import Event, FoldSkipped, Kind, Message
from tailrent_tui.core.rungs.fold import FoldArchive, fold_span, oldest_unpinned
from tailrent_tui.core.rungs.spill import SpillStore, admit_tool_result, spill_message
from tailrent_tui.core.rungs.truncate import truncate_text
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer, Summarizer


class UnknownPolicy(ValueError):
    """A policy name this build does not know."""


class PolicySettings(BaseModel):
    """Budget settings shared by all policies (DESIGN.md, "The context window")."""

    window: int = Field(default=32768, gt=0)
    fold_trigger: float = Field(default=0.9, gt=0, le=1)
    fold_target: float = Field(default=0.35, gt=0, le=1)
    spill_threshold: int | None = Field(
        default=None, ge=0, description="tokens per tool result; None: 1/16 of the window"
    )
    keep_recent: int = Field(default=2, ge=0, description="last messages no fold may take (the turn in flight)")
    tool_max_lines: int = Field(default=2000, gt=0, description="rung 1 cap for tool results in traces")
    naive_batch: int = Field(default=6, gt=0)
    autocompact_at: float = Field(default=0.835, gt=0, le=1)
    autocompact_keep_tokens: int = Field(default=20000, ge=0)
    autocompact_keep_share: float = Field(default=0.15, ge=0, le=1)
    respill_min_tokens: int | None = Field(
        default=None, ge=0, description="inline tool results at least this big are re-spilled; None: threshold/4"
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
    def respill_tokens(self) -> int:
        if self.respill_min_tokens is not None:
            return self.respill_min_tokens
        return max(1, self.spill_tokens // 4)


@dataclass
class PolicyContext:
    """What a policy may use: a summarizer, where spills and fold originals go, the settings."""

    summarizer: Summarizer = field(default_factory=LossySummarizer)
    spill_store: SpillStore | None = None
    archive: FoldArchive | None = None
    settings: PolicySettings = field(default_factory=PolicySettings)


class Policy:
    """Base policy: rungs 1 and 2 on entry, nothing after."""

    name = "base"
    description = ""
    autopin = False
    #: rent for this policy is charged with a cache that never expires (the floor)
    infinite_ttl = False

    def decision_detector(self) -> Any | None:
        """The detector to give the Session (auto-pin), or None."""
        if not self.autopin:
            return None
        from tailrent_tui.core.guard import DecisionDetector

        return DecisionDetector()

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
            session, tool, capped.text, ctx.spill_store,
            threshold=ctx.settings.spill_tokens, tool_call_id=tool_call_id, at=at,
        )

    def after_add(self, session: Session, ctx: PolicyContext) -> list[Event]:
        """Called after each message is added; returns the events it emitted."""
        return []

    def on_resume(self, session: Session, ctx: PolicyContext) -> list[Event]:
        """Called before a request whose cache has expired (a resume after an idle gap)."""
        return []


def _capture(session: Session) -> tuple[list[Event], Callable[[], None]]:
    """Collect the events emitted while a policy acts."""
    events: list[Event] = []
    session.listeners.append(events.append)

    def done() -> None:
        session.listeners.remove(events.append)

    return events, done


class NonePolicy(Policy):
    name = "none"
    description = "truncate and spill only; never folds; cache never expires (the floor)"
    infinite_ttl = True


class NaivePolicy(Policy):
    name = "naive"
    description = "the article's harness: over budget, fold the oldest 6 at index 0, once per add"

    def after_add(self, session: Session, ctx: PolicyContext) -> list[Event]:
        s = ctx.settings
        if session.context_tokens <= s.trigger_tokens:
            return []
        span = oldest_unpinned(session, s.naive_batch)
        if not span:
            return []
        ev = fold_span(
            session, span, summarizer=ctx.summarizer, guard="report", position="front",
            header="[folded {n} messages]", archive=ctx.archive, trigger=self.name,
        )
        return [ev]


class NaivePinPolicy(NaivePolicy):
    name = "naive-pin"
    description = "naive, with decisions pinned on arrival (the article's fix)"
    autopin = True


class AutocompactPolicy(Policy):
    name = "autocompact"
    description = "at 83.5% of the window, fold all but the recent ~20k tokens into one summary"

    def keep_tokens(self, s: PolicySettings) -> int:
        return min(s.autocompact_keep_tokens, int(s.window * s.autocompact_keep_share))

    def after_add(self, session: Session, ctx: PolicyContext) -> list[Event]:
        s = ctx.settings
        if session.context_tokens < int(s.window * s.autocompact_at):
            return []
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
            return []
        ev = fold_span(
            session, span, summarizer=ctx.summarizer, guard="report", position="front",
            archive=ctx.archive, trigger=self.name,
        )
        return [ev]


# No numbers in the header: the guard would take "#3" or "18 messages" for facts
# and carry them verbatim through every later fold of this summary.
LADDER_HEADER = "[fold summary]"


class LadderPolicy(Policy):
    name = "ladder"
    description = "truncate, spill, auto-pin; past the trigger re-spill, then one fold in place to the target, guarded"
    autopin = True

    def respill(self, session: Session, ctx: PolicyContext, target: int) -> None:
        """Re-spill big inline tool results, oldest first, until the context is at the target."""
        if ctx.spill_store is None:
            return
        floor = ctx.settings.respill_tokens
        for m in list(session.messages):
            if session.context_tokens <= target:
                break
            if m.kind == Kind.tool_result and not m.pinned and m.tokens >= floor:
                spill_message(session, m.id, ctx.spill_store)

    def span_to_target(self, session: Session, ctx: PolicyContext, target: int) -> list[str]:
        """The oldest unpinned messages whose fold brings the context to the target.

        Earlier summaries are taken last: left in place they stay in the cached
        prefix, and refolding them only when raw messages are not enough keeps
        the fold of a fold rare. The last `keep_recent` messages are never taken.
        """
        msgs = session.messages
        limit = max(0, len(msgs) - ctx.settings.keep_recent)
        excess = session.context_tokens - target
        chosen: set[str] = set()
        freed = 0
        for include_summaries in (False, True):
            for m in msgs[:limit]:
                if freed >= excess:
                    break
                if m.pinned or m.id in chosen:
                    continue
                if (m.kind == Kind.fold_summary) != include_summaries:
                    continue
                chosen.add(m.id)
                freed += m.tokens
        return [m.id for m in msgs if m.id in chosen]

    #: folds allowed in one step when a summary comes out bigger than hoped
    max_passes = 3

    def fold(self, session: Session, ctx: PolicyContext, trigger: str) -> None:
        """Fold down to the target in one step.

        The summary's size is only known after summarizing, so when a pass
        leaves the context above the target, another pass folds again (now
        taking the new summary too). All passes happen before the next request,
        so the cache is invalidated once, from the first span's position.
        """
        target = ctx.settings.target_tokens
        for _ in range(self.max_passes):
            before = session.context_tokens
            span = self.span_to_target(session, ctx, target)
            ev = fold_span(
                session, span, summarizer=ctx.summarizer, guard="repair", position="in_place",
                header=LADDER_HEADER, archive=ctx.archive, trigger=trigger,
            )
            if isinstance(ev, FoldSkipped) or session.context_tokens <= target or session.context_tokens >= before:
                return

    def _shrink(self, session: Session, ctx: PolicyContext, limit: int, trigger: str) -> list[Event]:
        """Past `limit`: re-spill big inline results, then if still past it, fold to the target."""
        if session.context_tokens <= limit:
            return []
        events, done = _capture(session)
        try:
            self.respill(session, ctx, ctx.settings.target_tokens)
            if session.context_tokens > limit:
                self.fold(session, ctx, trigger)
        finally:
            done()
        return events

    def after_add(self, session: Session, ctx: PolicyContext) -> list[Event]:
        return self._shrink(session, ctx, ctx.settings.trigger_tokens, "ladder: past the fold trigger")

    def on_resume(self, session: Session, ctx: PolicyContext) -> list[Event]:
        # The cache is gone: the whole context is rewritten on this request
        # anyway, so a fold now costs no extra re-evaluation and shrinks the rewrite.
        return self._shrink(session, ctx, ctx.settings.target_tokens, "ladder: resume after the cache expired")


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
