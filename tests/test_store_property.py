"""Round trip (hypothesis): random commands on a live session with the journal attached;
replaying the journal from disk gives the same state."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from folds import fold_span
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailrent_tui.core.messages import Kind
from tailrent_tui.core.rungs.fold import oldest_unpinned
from tailrent_tui.core.rungs.spill import admit_tool_result, spill_gain, spill_message
from tailrent_tui.core.session import SessionError
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.store.sessions import SessionDir, close_session, open_session

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=300)
command = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["user", "assistant"]), text, st.booleans()),
    st.tuples(st.just("pin"), st.integers(0, 60)),
    st.tuples(st.just("unpin"), st.integers(0, 60)),
    st.tuples(st.just("spill"), st.integers(0, 60)),
    st.tuples(st.just("tool"), st.integers(0, 2000)),
    st.tuples(st.just("fold"), st.integers(1, 5)),
    st.tuples(st.just("watch"), st.sampled_from(["Redis", "redis", "port", "TTL"])),
    st.tuples(st.just("unwatch"), st.sampled_from(["Redis", "port"])),
    st.tuples(st.just("note"), text),
)


def run(session, sd, cmd) -> None:
    kind = cmd[0]
    msgs = session.messages
    if kind == "add":
        session.add(cmd[1], cmd[2], pinned=cmd[3])
    elif kind in ("pin", "unpin", "spill") and msgs:
        m = msgs[cmd[1] % len(msgs)]
        if kind == "pin":
            session.pin(m.id)
        elif kind == "unpin":
            session.unpin(m.id)
        elif not m.pinned and m.kind not in (Kind.spill_pointer, Kind.fold_summary):
            if spill_gain(session, m) > 0:
                spill_message(session, m.id, sd.spills())
            else:  # a spill that would grow the context is refused, and changes nothing
                with pytest.raises(SessionError, match="nothing spilled"):
                    spill_message(session, m.id, sd.spills())
    elif kind == "tool":
        admit_tool_result(session, "grep", "match line\n" * (cmd[1] // 10 + 1), sd.spills(), threshold=200)
    elif kind == "fold":
        fold_span(session, oldest_unpinned(session, cmd[1]), summarizer=LossySummarizer(), guard="off", archive=sd.archive())
    elif kind == "watch":
        session.add_watch(cmd[1])
    elif kind == "unwatch":
        session.remove_watch(cmd[1])
    elif kind == "note":
        session.note(cmd[1] or "empty")


def state(session) -> dict:
    return {
        "messages": [m.model_dump() for m in session.messages],
        "pinned": [m.id for m in session.pinned],
        "totals": session.totals,
        "context": session.context_tokens,
        "folds": [f.model_dump() for f in session.folds],
        "skipped": [e.model_dump() for e in session.skipped],
        "spills": {k: v.model_dump() for k, v in session.spills.items()},
        "watch": list(session.watch),
        "notes": [n.model_dump() for n in session.notes],
        "user_unpinned": set(session.user_unpinned),
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(command, min_size=1, max_size=40))
def test_replayed_journal_equals_live_state(commands) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sd = SessionDir.create(Path(tmp), tokenizer="chars4", system="system prompt", window=8192)
        opened = open_session(sd, fsync=False)
        live, writer = opened.session, opened.writer
        for cmd in commands:
            run(live, sd, cmd)
        close_session(opened)
        assert writer.pending == 0

        reopened = open_session(sd, fsync=False)
        replayed = reopened.session
        assert state(replayed) == state(live)
        for spill_id in live.spills:
            assert sd.spills().exists(spill_id) or live.spills[spill_id].location.startswith("mem://")
        for f in live.folds:
            archived = sd.archive().read_fold(f.fold_no)
            assert [m.id for m in archived.originals] == f.span_ids
        close_session(reopened)
