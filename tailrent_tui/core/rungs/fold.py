"""Rung 5: fold — destructive compaction, last resort.

Keeps: one summary message in the span's place, the span's facts that the
summary carries, and (with guard "repair") every fact the summarizer dropped,
appended verbatim. The originals go to the fold archive before the fold is
applied: a fold is destructive for the context, never for the session.
Loses: the wording, and with guard "report" or "off" whatever facts the
summarizer dropped. Tool output in the span is not guarded (see
`GUARDED_KINDS`): it stays recoverable from the archive and the spills. The policy reaches for it only after truncation and
spilling, when the context is past the fold trigger, and then folds in one big
step down to the fold target, in place, so the cache before the span survives.
Pinned messages never enter the span.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from tailrent_tui.core import ledger as ledger_rules
from tailrent_tui.core.messages import Folded, FoldRecord, FoldRetired, FoldSkipped, Kind, Message, Unfolded
from tailrent_tui.core.ports import ArchivedFold, ArchiveError, FoldArchive
from tailrent_tui.core.session import Session, SessionError

if TYPE_CHECKING:
    from tailrent_tui.core.guard import Fact
    from tailrent_tui.core.ledger import Statement

GuardMode = Literal["repair", "report", "off"]
Position = Literal["in_place", "front", "after"]
"""Where a fold's summary goes: where its span began (`in_place`, the prefix before it stays
cached), at index 0 (`front`, the article's harness), or after the messages the fold keeps
(`after`: an engine that shifts KV, llama.cpp with `n_cache_reuse`, keeps the kept messages'
cache; the summary says which turns it replaces)."""


class FoldAborted(RuntimeError):
    """The fold did not happen (its originals could not be archived)."""


def foldable(session: Session) -> list[Message]:
    """Messages a fold may touch: not pinned."""
    return [m for m in session.messages if not m.pinned]


def span_to_target(
    session: Session, target_tokens: int, *, keep_recent: int = 2, summary_share: float = 0.0, turn_ends: bool = False
) -> list[str]:
    """The oldest unpinned messages whose fold brings the context to `target_tokens`.

    `summary_share` is the part of the span its summary is expected to keep:
    the span is taken that much larger, so one fold reaches the target instead
    of a second one refolding the first's summary. Earlier summaries are taken
    last: left in place they stay in the cached prefix, and refolding them only
    when raw messages are not enough keeps the fold of a fold rare. The last
    `keep_recent` messages are never taken (the turn in flight). With `turn_ends` (a sliding-window
    or recurrent model on llama.cpp, whose context checkpoints sit at user-message starts) the span
    ends where a user message starts (`end_on_turn`), so the next fold's span starts on a checkpoint.
    """
    msgs = session.messages[: max(0, len(session.messages) - keep_recent)]
    excess = session.context_tokens - target_tokens
    kept = 1.0 - summary_share
    framing = session.framing
    summary = Kind.fold_summary
    chosen: list[str] = []
    freed = 0.0
    for m in msgs:
        if freed >= excess:
            break
        # depth one: a summary is never folded again (retire_summaries makes room instead)
        if m.pinned or m.kind is summary or m.cut_off:
            continue
        chosen.append(m.id)
        freed += (m.tokens + framing.message(m.role)) * kept
    return end_on_turn(session, chosen, len(msgs)) if turn_ends and chosen else chosen


def end_on_turn(session: Session, chosen: list[str], limit: int) -> list[str]:
    """`chosen` ending where a user message starts: the rest of its last turn is taken too while it
    may be (unpinned, no summary, before message `limit`: the turn in flight), else the span is cut
    back to the last of its messages that a user message follows; empty when neither way finds one."""
    msgs = session.messages
    index = {m.id: n for n, m in enumerate(msgs)}

    def user_follows(n: int) -> bool:
        # a pinned system note (the text protocol's, a ledger) stays where it is: a user message after it
        # still starts the next span's turn (the resume fold of a session that has one took no span at all)
        k = n + 1
        while k < len(msgs) and msgs[k].pinned and msgs[k].role == "system":
            k += 1
        return k < len(msgs) and msgs[k].role == "user"

    taken = list(chosen)
    n = index[taken[-1]]
    while n + 1 < limit:
        if user_follows(n):
            return taken
        m = msgs[n + 1]
        if m.pinned or m.kind is Kind.fold_summary:
            break
        if not m.cut_off:
            taken.append(m.id)
        n += 1
    else:
        if user_follows(n):
            return taken  # the turn in flight starts right after it
    for k in range(len(chosen) - 1, 0, -1):
        if user_follows(index[chosen[k - 1]]):
            return chosen[:k]
    # one turn whose end is the turn in flight's (a user message, its reply among the kept ones): no span
    # rather than one that leaves the next fold starting mid-turn, off every checkpoint (gemma3: 3 of 9 did)
    return []


def _retirement_pointer(
    session: Session, record: FoldRecord, merged: list[int], gone: set[str], summaries_tokens: int
) -> tuple[str, list[str]]:
    """The one-line pointer that stands for this fold and the retired ones it takes in, and the facts
    that leave with their summaries: what their folds guarded and kept that no other message shows
    (kept verbatim in the pointer while that is much smaller than the summaries it replaces)."""
    from tailrent_tui.core import guard as fact_guard

    records_by_no = {f.fold_no: f for f in session.folds}
    folds = sorted([*merged, record.fold_no])
    messages = sum(len(records_by_no[no].span_ids) for no in folds)
    named = f"fold #{folds[0]}" if len(folds) == 1 else f"folds #{folds[0]}-#{folds[-1]}"
    pointer = (
        f"[{named} archived: {messages} earlier messages are in the fold archive; "
        f"/unfold {record.fold_no}, search_history or tailrent recall brings them back]"
    )
    # what its fold guarded and kept: the facts of the span's conversation (not of its tool output)
    # (an older pointer holds the facts of the folds merged into it before: all of them leave now)
    covered: list[int] = []
    todo = list(merged)
    while todo:
        no = todo.pop()
        if no in covered or no not in records_by_no:
            continue
        covered.append(no)
        todo.extend(session.retired[no].merged if no in session.retired else ())
    lost_before = {t for no in covered if no in session.retired for t in session.retired[no].facts_lost}
    held = [
        fact_guard.Fact(text=t, kind="quoted")
        for r in (record, *(records_by_no[no] for no in covered))
        for t in r.facts
        if t not in set(r.facts_lost) and t not in lost_before
    ]
    others = (o.content for o in session.messages if o.id not in gone)
    rest = fact_guard.Visible("\n".join([session.system, pointer, *others]))
    missing = [f for f in held if not rest.shows(f)]
    with_facts = fact_guard.repair_summary(pointer, missing) if missing else pointer
    if session.count(with_facts) <= 0.7 * summaries_tokens:
        return with_facts, []
    return pointer, [f.text for f in missing]


def _notes_retire_together(
    session: Session, record: FoldRecord, following: FoldRecord | None, tokens: int, summaries_tokens: int
) -> bool:
    """A pointer no smaller than the one summary it replaces: a fold of last resort's short note goes all
    the same when the next one's (another such note) takes it in and the two shrink together; a summary
    that holds what it says stays (its retirement would lose it to save nothing)."""
    if following is None or not (record.dropped and following.dropped):
        return False
    return tokens < summaries_tokens + session.get(following.summary.id).tokens


def retire_summaries(
    session: Session, target_tokens: int, *, keep_recent: int = 2, position: Position = "in_place"
) -> list[FoldRetired]:
    """Depth one: when summaries crowd the window, the oldest leave the context whole, each for
    a one-line pointer to the fold archive, until the context is at `target_tokens`.

    Nothing is summarized again. Its statements were carried into the ledger when it was
    made, so what leaves is its prose and the facts it held: those no other message shows
    are reported lost on the event (recall, `search_history` and `/unfold` still reach them).
    With `position` "after" (an engine that shifts KV) the pointer goes before the turn in flight
    (`pointer_position`) and the summaries leave their places: the engine bridges the deletion,
    where a pointer written in a summary's place near the head made it read everything after it."""

    done: list[FoldRetired] = []
    recent = {m.id for m in session.messages[len(session.messages) - keep_recent :]} if keep_recent else set()
    records = {f.summary.id: f for f in session.folds}
    records_by_no = {f.fold_no: f for f in session.folds}
    candidates = [
        m.id
        for m in session.messages
        if (r := records.get(m.id)) is not None and not m.pinned and m.id not in recent and r.fold_no not in session.retired
    ]
    for at, mid in enumerate(candidates):
        if session.context_tokens <= target_tokens:
            break
        m = session.get(mid)
        record = records[mid]
        # one pointer stands for every retired fold: the older pointers leave with this one
        merged = [no for no in session.retired if records_by_no[no].summary.id in session]
        gone = {m.id, *(records_by_no[no].summary.id for no in merged)}
        summaries_tokens = sum(session.get(i).tokens for i in gone)
        pointer, lost = _retirement_pointer(session, record, merged, gone, summaries_tokens)
        tokens = session.count(pointer)
        following = records[candidates[at + 1]] if at + 1 < len(candidates) else None
        if tokens >= summaries_tokens and not _notes_retire_together(session, record, following, tokens, summaries_tokens):
            continue
        ev = session.emit(
            FoldRetired(
                fold_no=record.fold_no,
                pointer=pointer,
                pointer_tokens=tokens,
                facts_lost=lost,
                merged=merged,
                position=pointer_position(session, gone) if position == "after" else None,
                at=session.clock(),
            )
        )
        done.append(ev)  # type: ignore[arg-type]
    return done


def pointer_position(session: Session, leaving: Iterable[str]) -> int:
    """Where a retired summary's pointer goes when folds are placed after the kept messages, as an index
    among the messages that stay: after the last message the engine has read in this place (a finished
    reply, a fold summary, a ledger: the latest fold's summary and ledger come right before the turn in
    flight, cached where they are), before the turn in flight."""
    gone = set(leaving)
    rest = [m for m in session.messages if m.id not in gone]
    for i in range(len(rest) - 1, -1, -1):
        m = rest[i]
        if m.cut_off:
            continue
        if (m.role == "assistant" and not m.tool_calls) or m.kind in (Kind.fold_summary, Kind.ledger):
            return i + 1
    return 0


def oldest_unpinned(session: Session, count: int) -> list[str]:
    """The first `count` unpinned messages (the article's fold batch)."""
    out: list[str] = []
    for m in session.messages:
        if len(out) >= count:
            break
        if not m.pinned:
            out.append(m.id)
    return out


#: Kinds whose facts the guard carries through a fold. Tool output and spill
#: pointers are left out on purpose: their content is recoverable (the spill
#: file, the fold archive via search_history, or running the tool again), and
#: carrying every path and count of every grep into each summary would make
#: summaries as big as what they replace.
GUARDED_KINDS = (Kind.chat, Kind.fold_summary, Kind.delegate_result, Kind.memory_pointer)

#: the guard's repair block may take this share of its span's tokens (at least REPAIR_FLOOR):
#: the facts past it are reported lost, not carried
REPAIR_SHARE = 0.25
REPAIR_FLOOR = 48


def _span_text(span: Sequence[Message], folds: Sequence[FoldRecord] = ()) -> str:
    """The span's text the fact guard reads: conversation, summaries, pointers to memory.

    A summary in the span contributes the facts it carries (its fold's facts
    that survived it), not its whole text: its text also summarizes tool
    output, whose ids and counts are not facts to carry (see GUARDED_KINDS).
    """
    lineage = {f.summary.id: f for f in folds}
    parts = []
    for m in span:
        if m.kind == Kind.fold_summary and m.id in lineage:
            record = lineage[m.id]
            lost = set(record.facts_lost)
            parts.append("; ".join(f for f in record.facts if f not in lost))
        elif m.kind in GUARDED_KINDS:
            parts.append(m.content)
    return "\n".join(parts)


def skip_fold(session: Session, reason: str, trigger: str) -> FoldSkipped:
    """Record that a fold was asked for and did nothing, and why."""
    return session.emit(FoldSkipped(reason=reason, trigger=trigger, at=session.clock()))  # type: ignore[return-value]


def span_messages(session: Session, span_ids: Iterable[str]) -> list[Message]:
    """The span's messages in transcript order; a pinned one is refused.

    A reply that was cut off is left out: it was never in the context.
    """
    wanted = dict.fromkeys(span_ids)
    span = [m for m in session.messages if m.id in wanted and not m.cut_off]
    if len(span) < len(wanted):
        for i in wanted:
            session.get(i)  # names the first id not in the transcript
    pinned = [m.id for m in span if m.pinned]
    if pinned:
        raise SessionError(f"cannot fold pinned messages {pinned}: unpin them first")
    return span


def after_position(session: Session, span_ids: Iterable[str]) -> int:
    """Where a fold placed `after` puts its summary, as an index among the messages it keeps:
    after the last finished reply (an assistant message with no tool call), before the turn in
    flight (the user's new message, a tool exchange), so a request never ends on the summary;
    with no reply since the span, before the last user message; never before the span's place."""
    ids = set(span_ids)
    kept = [m for m in session.messages if m.id not in ids]
    first = next((i for i, m in enumerate(session.messages) if m.id in ids), len(session.messages))
    place = sum(1 for m in session.messages[:first] if m.id not in ids)
    for i in range(len(kept) - 1, place - 1, -1):
        m = kept[i]
        if m.role == "assistant" and not m.tool_calls and not m.cut_off:
            return i + 1
    # no reply since the span: before the last user message (the turn in flight), else in place
    for i in range(len(kept) - 1, place - 1, -1):
        if kept[i].role == "user" and not kept[i].cut_off:
            return i
    return place


#: the shortest run llama.cpp shifts into place (`n_cache_reuse`, as tailrent sends it): a shorter piece of
#: the cached prompt left alone between two deletions stops the shift, and everything after it is read again
REUSE_RUN_TOKENS = 64


def stranded(session: Session, span_ids: Iterable[str]) -> list[str]:
    """Ids of the messages a fold placed `after` moves after its summary: short runs of kept messages that
    sit between two parts of the span, made only of retired folds' pointers.

    A fold takes the oldest raw messages and steps over summaries and pointers, so a retirement's pointer,
    put before the turn in flight, ends up between the messages the next fold takes on both sides of it; left
    there it is a piece of the cached prompt shorter than llama.cpp's shift (REUSE_RUN_TOKENS), and the
    engine read everything after it again (456 tokens where an ordinary turn reads 253, on the 30-turn
    bench). Moved after the summary, it is read again alone (its few tokens). A run of REUSE_RUN_TOKENS or
    more stays: the engine shifts it; conversation, summaries and pinned messages stay where they were."""
    ids = set(span_ids)
    visible = [m for m in session.messages if not m.cut_off]
    at = [n for n, m in enumerate(visible) if m.id in ids]
    if len(at) < 2:
        return []
    out: list[str] = []
    run: list[Message] = []
    for m in visible[at[0] : at[-1] + 1]:
        if m.id not in ids:
            run.append(m)
            continue
        tokens = sum(session.sent_tokens(r) for r in run)
        if run and tokens < REUSE_RUN_TOKENS and all(_pointer(r) for r in run):
            out.extend(r.id for r in run)
        run = []
    return out


def _pointer(m: Message) -> bool:
    """A retired fold's pointer (`retire_summaries`): its place says nothing, it may move."""
    return m.kind is Kind.fold_summary and bool(m.meta.get("retired")) and not m.pinned


def prepare_fold(
    session: Session,
    span_ids: Iterable[str],
    *,
    summary: str,
    summarizer_name: str,
    guard: GuardMode = "repair",
    position: Position = "in_place",
    header: str | None = None,
    trigger: str = "manual",
    rejected: str | None = None,
    asked: str | None = None,
    ledger_order: Sequence[str] = (),
) -> FoldRecord:
    """The fold of a span with this summary, guarded, as a record: nothing is applied yet.

    The caller sees the summary's size (`tokens_after`) against the span's
    (`tokens_before`) before deciding to apply it with `apply_fold`. `asked`: the
    user message the summary answered in the conversation's context (`Summary.asked`):
    it heads the summary in place of `header`, and the summary travels as that
    question and its answer (agent/wire.py), the tokens the engine cached. `ledger_order`: the
    statements of a ledger the engine read already for this fold (`stable_order`).
    """
    span = span_messages(session, span_ids)
    carried = None
    if ledger_order and session.statements:
        carried = stable_order(session.carried_by(span), ledger_order)
    return _prepare(
        session,
        span,
        summary=summary,
        summarizer_name=summarizer_name,
        guard=guard,
        position=position,
        header=header,
        trigger=trigger,
        rejected=rejected,
        asked=asked,
        carried=carried,
    )


def stable_order(carried: Sequence[Statement], order: Sequence[str]) -> list[Statement]:
    """`carried` with the statements of `order` (a ledger the engine has read) first, in that order, and
    the others after them, in their own order.

    A ledger's lines follow the span; when the pins' budget binds, the user's next message can change which
    of them fit (a correction frees room for older lines), and a line that comes in among the lines sent
    ahead made llama.cpp read everything after it again (fold 1 of the 30-turn bench: 1,062 tokens where an
    ordinary turn reads 253). Kept in the order read, a line that left is a deletion the engine bridges and
    the new lines are read at the end, with the user's message."""
    rank = {sid: n for n, sid in enumerate(order)}
    return sorted(carried, key=lambda st: (st.id not in rank, rank.get(st.id, 0)))


@dataclass
class _Guarded:
    """What the fact guard made of a fold: the facts it guards, what the summary dropped, what is lost
    (after the repair), what the repair carried, the statements the ledger had no room for, the body."""

    facts: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    uncarried: list[str] = field(default_factory=list)
    body: str = ""


def _span_facts(session: Session, seen: Sequence[Message]) -> list[Fact]:
    """The facts a fold of these messages guards: a summary in the span (the baselines refold theirs)
    brings the facts its fold kept, as they are (extracting them again from its text would cost a pass
    over every fact ever kept); the user's words come first, so that when the repair's room binds,
    what the user said is carried first."""
    from tailrent_tui.core import guard as fact_guard

    lineage = {f.summary.id: f for f in session.folds}
    span_facts: list[Fact] = []
    known: set[str] = set()
    for m in seen:
        record = lineage.get(m.id) if m.kind == Kind.fold_summary else None
        if record is not None:
            gone = set(record.facts_lost)
            for t in record.facts:
                if t not in gone and t.casefold() not in known:
                    known.add(t.casefold())
                    span_facts.append(fact_guard.Fact(text=t, kind="quoted"))
    others = [m for m in seen if not (m.kind == Kind.fold_summary and m.id in lineage)]
    users = [m for m in others if m.role == "user"]
    rest_of_span = [m for m in others if m.role != "user"]
    for part in (users, rest_of_span):
        for f in fact_guard.guarded_facts(_span_text(part), session.watch) if part else ():
            if f.text.casefold() not in known:
                known.add(f.text.casefold())
                span_facts.append(f)
    return span_facts


def _guard(
    session: Session,
    span: list[Message],
    ids: set[str],
    summary: str,
    head: str,
    guard: GuardMode,
    ledger_msg: Message | None,
    carried: list[Statement],
) -> _Guarded:
    """The fact guard of a fold: what its span states that stays visible nowhere after it is repaired
    into the summary (``repair``, within its room) or reported lost."""
    out = _Guarded(body=summary)
    if guard == "off":
        return out
    from tailrent_tui.core import guard as fact_guard

    span_facts = _span_facts(session, session.summarizable(span) if session.statements else span)
    out.facts = [f.text for f in span_facts]
    # What stays visible after the fold, besides the summary: one text, read once.
    rest = fact_guard.Visible(_rest_text(session, ids, ledger_msg))
    missing = [f for f in span_facts if not rest.shows(f)]
    in_summary = fact_guard.Visible(head + "\n" + summary)
    missing = [f for f in missing if not in_summary.shows(f)]
    out.dropped = [f.text for f in missing]
    out.lost = out.dropped  # the same list: the statements _uncarried reports lost count as dropped too
    if guard == "repair" and missing:
        # the repair has room for a share of the span: a pasted log's sixty timings would
        # otherwise make the summary as big as what it replaces; what has no room is lost, said so
        room = max(REPAIR_FLOOR, int(sum(m.tokens for m in span) * REPAIR_SHARE))
        fit: list[Fact] = []
        for f in missing:
            room -= session.count(f.text) + 1
            if room < 0:
                break
            fit.append(f)
        out.body = fact_guard.repair_summary(summary, fit)
        out.repaired = [f.text for f in fit]
        after = fact_guard.Visible(head + "\n" + out.body)
        out.lost = [f.text for f in missing if not after.shows(f)]
    if carried or session.statements:
        _uncarried(session, span, ids, ledger_msg, carried, out)
    return out


def _uncarried(
    session: Session, span: list[Message], ids: set[str], ledger_msg: Message | None, carried: list[Statement], out: _Guarded
) -> None:
    """Statements the ledger had no room for (past the pins' budget): lost as statements unless the
    words stay visible anyway; a summary that quotes one guards it, so that its retirement checks it."""
    from tailrent_tui.core import guard as fact_guard

    kept = {st.id for st in carried}
    shown = fact_guard.Visible(_rest_text(session, ids, ledger_msg) + "\n" + out.body)
    for st in session.carried_by(span, budget=False):
        if st.id in kept:
            continue
        if not shown.shows(fact_guard.Fact(text=st.text, kind="quoted")):
            out.uncarried.append(st.id)
            out.lost.append(st.text)
        elif st.text not in out.facts:
            # the summary's text shows it: a fact this fold guards, so that the summary's
            # retirement checks it too (it was lost there without a word)
            out.facts.append(st.text)


def _position_index(session: Session, span: list[Message], ids: set[str], position: Position) -> int:
    """Where the summary goes: first, after the kept messages, or in the place of the span's first
    message (the prefix before it, and its cache, left untouched)."""
    if position == "front":
        return 0
    if position == "after":
        return after_position(session, ids)
    index = 0
    for m in session.messages:
        if m.id == span[0].id:
            break
        index += m.id not in ids
    return index


def _prepare(
    session: Session,
    span: list[Message],
    *,
    summary: str,
    summarizer_name: str,
    guard: GuardMode,
    position: Position,
    header: str | None,
    trigger: str,
    rejected: str | None,
    asked: str | None = None,
    carried: list[Statement] | None = None,
) -> FoldRecord:
    """prepare_fold of the span's messages (`span_messages`); `carried`: the statements the fold keeps
    verbatim, when not the ones the pins' budget has room for (`fold_ledger`)."""
    if not span:
        raise SessionError("nothing to fold: the span holds only replies that were cut off, which are not in the context")
    ids = {m.id for m in span}
    depth = 1 + max(m.fold_depth for m in span)
    fold_no = len(session.folds) + 1

    # The span's current statements are carried verbatim into a pinned ledger message where
    # the span was; the summary is prose around them (the summarizer never saw them).
    if carried is None:
        carried = session.carried_by(span) if session.statements else []
    ledger_msg = None
    if carried:
        ledger_msg = session.make_message(
            "system",
            ledger_rules.ledger_text(carried),
            kind=Kind.ledger,
            pinned=True,
            meta={"statements": [st.id for st in carried]},
        )

    if header is None:
        header = "[fold #{no} · {n} messages · depth {depth}]"
    head = asked if asked else header.format(no=fold_no, n=len(span), depth=depth)
    guarded = _guard(session, span, ids, summary, head, guard, ledger_msg, carried)
    facts, dropped, lost, repaired, uncarried, body = (
        guarded.facts,
        guarded.dropped,
        guarded.lost,
        guarded.repaired,
        guarded.uncarried,
        guarded.body,
    )
    content = head + "\n" + body
    tokens_before = sum(m.tokens for m in span)
    summary_msg = session.make_message("system", content, kind=Kind.fold_summary, meta={"asked": asked} if asked else None)
    summary_msg.fold_depth = depth
    summary_msg.folded_ids = [m.id for m in span]
    repair_tokens = summary_msg.tokens - session.count(head + "\n" + summary) if repaired else 0
    tokens_after = summary_msg.tokens + (ledger_msg.tokens if ledger_msg is not None else 0)

    position_index = _position_index(session, span, ids, position)
    moved = stranded(session, ids) if position == "after" else []
    if moved:
        # the index among the messages that stay where they are
        gone = set(moved)
        kept = [m for m in session.messages if m.id not in ids]
        position_index -= sum(1 for m in kept[:position_index] if m.id in gone)
    context_before = session.context_tokens
    return FoldRecord(
        fold_no=fold_no,
        span_ids=[m.id for m in span],
        position=position_index,
        summary=summary_msg,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        context_before=context_before,
        context_after=context_before - tokens_before + tokens_after,
        depth=depth,
        facts=facts,
        facts_dropped=dropped,
        facts_lost=lost,
        facts_repaired=repaired,
        repair_tokens=max(0, repair_tokens),
        trigger=trigger,
        summarizer=summarizer_name,
        rejected=rejected,
        guard=guard,
        ledger=ledger_msg,
        carried=[st.id for st in carried],
        uncarried=uncarried,
        moved=moved,
    )


def _rest_text(session: Session, span_ids: set[str], ledger_msg: Message | None) -> str:
    """What the context shows besides the span and its summary: the system prompt, every
    other message, and the ledger message the fold adds."""
    parts = [session.system]
    parts.extend(m.content for m in session.messages if m.id not in span_ids and not m.cut_off)
    if ledger_msg is not None:
        parts.append(ledger_msg.content)
    return "\n".join(parts)


def apply_fold(session: Session, record: FoldRecord, archive: FoldArchive | None) -> Folded:
    """Archive the originals, then apply the fold; if the archive cannot write, nothing is folded."""
    if archive is not None:
        span = [session.get(i) for i in record.span_ids]
        try:
            archive.write_fold(record.fold_no, span, record.summary.content, record.facts_lost or record.facts_dropped)
        except OSError as exc:
            raise FoldAborted(f"fold #{record.fold_no} not applied: its originals could not be archived ({exc})") from exc
    event = session.emit(Folded(fold=record, at=session.clock()))
    if record.trigger == LEDGER_TRIGGER and (record.uncarried or record.facts_lost):
        session.note(
            f"the window has no room for every pin beside the system prompt and the newest messages: fold "
            f"#{record.fold_no} moved what ranked lowest to the fold archive ({len(record.facts_lost)} lost, as the guard "
            f"counts; /unfold {record.fold_no} brings it back); a shorter system prompt or a bigger window keeps it",
            "warning",
        )
    elif record.uncarried:
        session.note(
            f"the ledger is past its {session.pin_budget:,}-token budget ([fold] pin_share): fold #{record.fold_no} "
            f"could not keep {len(record.uncarried)} statement{'s' if len(record.uncarried) != 1 else ''} verbatim "
            "(the guard counts them lost); supersede (x) or unpin (u) what no longer holds",
            "warning",
        )
    return event  # type: ignore[return-value]


def unfold_reason(session: Session, fold_no: int, originals: Sequence[Message], limit: int) -> str | None:
    """Why fold `fold_no` cannot be undone now, or None when it can.

    Its summary must still be in the context, unpinned, and the originals must
    fit: the context with them back must stay under `limit` (the fold trigger),
    or the next message would fold them again."""
    record = next((f for f in session.folds if f.fold_no == fold_no), None)
    if record is None:
        return f"no fold #{fold_no}"
    if fold_no in session.unfolded:
        return f"fold #{fold_no} is undone already"
    if record.summary.id not in session:
        later = next((f.fold_no for f in session.folds if record.summary.id in f.span_ids), None)
        retired = next((no for no, r in session.retired.items() if fold_no in r.merged), None)
        if later:
            where = f"fold #{later} took its summary: unfold #{later} first"
        elif retired:
            where = (
                f"it is archived whole (fold #{retired}'s pointer stands for it in the context): "
                "search_history or tailrent recall reaches it"
            )
        else:
            where = "its summary is gone"
        return f"fold #{fold_no} cannot be undone: {where}"
    summary = session.get(record.summary.id)
    if summary.pinned:
        return f"fold #{fold_no}'s summary is pinned: unpin it first"
    if not originals:
        return f"fold #{fold_no}'s originals are not in its archive"
    back = sum(session.sent_tokens(m) for m in originals if not m.cut_off)
    after = session.context_tokens - session.sent_tokens(summary) + back
    if after > limit:
        return (
            f"fold #{fold_no} cannot be undone: its {len(originals)} originals ({back:,} tokens) would bring the "
            f"context to {after:,} tokens, over the fold trigger ({limit:,}); {after - limit:,} tokens must go first"
        )
    return None


def unfold(session: Session, fold_no: int, originals: Sequence[Message], *, limit: int) -> Unfolded:
    """Undo fold `fold_no`: its originals back in its summary's place (SessionError says why not)."""
    why = unfold_reason(session, fold_no, originals, limit)
    if why is not None:
        raise SessionError(why)
    return session.emit(Unfolded(fold_no=fold_no, originals=list(originals), at=session.clock()))  # type: ignore[return-value]


#: the trigger of `fold_ledger`'s folds, as the Folds panel and the inspector show it
LEDGER_TRIGGER = "ladder: the ledger crowds the request"


def fold_ledger(
    session: Session, excess: int, *, header: str | None = None, release: bool = True, keep_recent: int = 0
) -> FoldRecord | None:
    """The ladder's last rung, when what crowds the request is the ledger itself: a fold of the
    ledger messages (those folds and edits made; instructions and messages pinned by hand stay)
    into one. Merged, each heading is paid once, and nothing is lost (a statement the user unpinned
    stays, marked unpinned, until a release: it leaves first). With `release`, the messages
    auto-pinned for their statements join it (their statements go on in the merged ledger, verbatim;
    their other words leave, reported as any fold's), and if that still saves less than `excess`
    tokens, the statements ranked lowest leave for the fold archive until it does: the user's
    unclassified words first, then the detector's lowest scores, older first; the guard reports
    each one lost. None when the fold would not save `excess` (or, without `release`, would save
    nothing). The last `keep_recent` messages are the turn in flight: a pinned one stays whole (the
    user's newest question is in it)."""
    recent = {m.id for m in session.messages[len(session.messages) - keep_recent :]} if keep_recent else set()

    def holds(m: Message) -> bool:
        if m.cut_off or m.id in session.user_pinned or (m.id in recent and m.kind is not Kind.ledger):
            return False
        # a user's or model's message pinned for its statements (the app's own pinned notes are system messages)
        return m.kind is Kind.ledger or (release and m.kind is Kind.chat and m.pinned and m.role in ("user", "assistant"))

    holders = [m for m in session.messages if holds(m)]
    if not holders:
        return None
    # the statements the user unpinned leave first: a merge keeps them (it loses nothing), a release reports them
    loose = [
        st
        for m in holders
        for sid in session.statements_held(m.id)
        if (st := session.statements.get(sid)) is not None and st.unpinned and st.status == "current"
    ]
    held = session.carried_by(holders, budget=False) + loose
    line_cost = {st.id: session.count(ledger_rules.ledger_line(st)) + 1 for st in held}
    before = sum(m.tokens for m in holders)
    if header is None:
        header = "[fold #{no} · {n} messages · depth {depth}]"
    head = header.format(no=len(session.folds) + 1, n=len(holders), depth=1)

    ledgers = sum(m.kind is Kind.ledger for m in holders)
    pinned = [m for m in holders if m.kind is not Kind.ledger]
    pins = len(pinned)
    # (a message auto-pinned as a decision where the ledger is off states nothing the ledger keeps)
    stated = any(session.statements_held(m.id) for m in pinned)

    def summary_text(gone: int) -> str:
        parts = [f"the ledger's {ledgers} message{'s' if ledgers != 1 else ''} merged into one"] if ledgers else []
        if pins:
            kept_note = ", what they state kept in the ledger" if stated else ""
            parts.append(f"{pins} pinned message{'s' if pins != 1 else ''} left for the archive{kept_note}")
        if gone:
            parts.append(f"{gone} statement{'s' if gone != 1 else ''} left for the archive (/ledger lists them)")
        return "; ".join(parts)

    def after(kept: list[Statement]) -> int:
        # the merged ledger, and the fold's own summary in the holders' place
        gone = len(held) - len(kept)
        ledger_cost = session.count(ledger_rules.LEDGER_HEADER) + sum(line_cost[st.id] for st in kept) if kept else 0
        return ledger_cost + session.count(head + "\n" + summary_text(gone))

    kept = list(held)
    for st in sorted(held, key=lambda st: (not st.unpinned, not st.said, st.score, st.at)):
        if before - after(kept) >= excess or not release:
            break
        kept.remove(st)
    if before - after(kept) < (excess if release else 1):
        return None
    summary = summary_text(len(held) - len(kept))
    record = _prepare(
        session,
        holders,
        summary=summary,
        summarizer_name="ledger",
        guard="report",
        position="in_place",
        header=header,
        trigger=LEDGER_TRIGGER,
        rejected=None,
        carried=kept,
    )
    kept_ids = {st.id for st in kept}
    left = [st for st in loose if st.id not in kept_ids]
    if not left:
        return record
    # the guard checks the statements the ladder carries; an unpinned one that leaves is counted here
    from tailrent_tui.core import guard as fact_guard

    shown = fact_guard.Visible(_rest_text(session, {m.id for m in holders}, record.ledger) + "\n" + record.summary.content)
    lost = [st for st in left if not shown.shows(fact_guard.Fact(text=st.text, kind="quoted"))]
    return record.model_copy(
        update={
            "uncarried": [*record.uncarried, *(st.id for st in lost)],
            "facts_lost": [*record.facts_lost, *(st.text for st in lost)],
        }
    )


def nothing_reason(session: Session) -> str:
    """Why no span could be chosen."""
    if not session.messages:
        return "nothing to fold: the transcript is empty"
    if all(m.pinned for m in session.messages):
        return "nothing to fold: every message is pinned"
    return "nothing to fold: only the newest messages are left, and pins"


class MemoryFoldArchive(FoldArchive):
    """Fold originals kept in memory: for tests, benchmarks and sub-sessions."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.folds: dict[int, ArchivedFold] = {}

    def write_fold(self, fold_no: int, originals: Sequence[Message], summary: str, facts_lost: Sequence[str]) -> None:
        self.folds[fold_no] = ArchivedFold.of(fold_no, originals, summary, facts_lost, at=self.clock())

    def read_fold(self, fold_no: int) -> ArchivedFold:
        try:
            return self.folds[fold_no].model_copy(deep=True)
        except KeyError:
            raise ArchiveError(f"fold #{fold_no} is not in the archive (kept in memory)") from None

    def fold_numbers(self) -> list[int]:
        return sorted(self.folds)
