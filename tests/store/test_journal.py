"""The journal: round trip, torn tail, corruption, repair, versions, and write faults."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from tailrent_tui.core.messages import Note
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.store import journal as jmod
from tailrent_tui.store.journal import (
    AsyncJournalWriter,
    JournalCorrupt,
    JournalVersionError,
    JournalWriter,
    attach,
    load_journal,
    repair_journal,
)


def live_session() -> Session:
    return Session(counter=get_counter("chars4"), system="be brief", window=4096)


def write_session(path: Path, n: int = 5, *, fsync: bool = True) -> tuple[Session, JournalWriter]:
    s = live_session()
    w = JournalWriter(path, session_id="s1", fsync=fsync)
    attach(s, w)
    for i in range(n):
        s.add("user" if i % 2 == 0 else "assistant", f"line {i}: déjà vu ✓")
    return s, w


def test_round_trip_keeps_every_event_in_order(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    s, w = write_session(path, 6)
    s.pin(s.messages[2].id)
    s.add_watch("Redis")
    w.close()
    result = load_journal(path)
    assert result.header.session == "s1" and result.header.version == 1
    assert not result.torn and result.warnings == []
    replayed = live_session()
    for ev in result.events:
        replayed.apply(ev)
    assert [m.model_dump() for m in replayed.messages] == [m.model_dump() for m in s.messages]
    assert replayed.totals == s.totals and replayed.watch == s.watch
    assert result.line_numbers[0] == 2  # line 1 is the header


def test_torn_last_line_loads_the_rest_and_keeps_the_bytes_aside(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    _s, w = write_session(path, 4)
    w.close()
    torn = b'{"at": 1.0, "type": "message_added", "message": {"id": "half'
    with open(path, "ab") as f:
        f.write(torn)
    before = path.read_bytes()

    result = load_journal(path)
    assert result.torn
    assert len(result.events) == 4
    assert len(result.warnings) == 1 and "torn" in result.warnings[0]
    assert result.torn_bytes_path is not None and result.torn_bytes_path.read_bytes() == torn
    assert path.read_bytes() == before, "the original journal must not change on load"
    # loading again reuses the side file instead of making another
    again = load_journal(path)
    assert again.torn_bytes_path == result.torn_bytes_path
    assert len(list(tmp_path.glob("journal.torn-*"))) == 1


def test_next_writer_starts_a_fresh_line_after_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    _, w = write_session(path, 3)
    w.close()
    with open(path, "ab") as f:
        f.write(b'{"at": 2.0, "type": "no')
    before = path.read_bytes()
    w2 = JournalWriter(path)
    assert w2.append(Note(text="after the crash", at=3.0))
    w2.close()
    assert path.read_bytes().startswith(before), "appending must never rewrite what was there"
    result = load_journal(path)
    assert [type(e).__name__ for e in result.events] == ["MessageAdded"] * 3 + ["Note"]
    assert result.events[-1].text == "after the crash"
    assert result.healed_lines == [5] and not result.torn


@pytest.mark.parametrize("kept", [1, 5, 15, 40], ids=lambda k: f"{k} bytes of the marker")
def test_a_fresh_line_fix_up_cut_short_still_loads_and_is_marked_by_the_next_writer(tmp_path: Path, kept: int) -> None:
    """A kill (or a full disk) in the middle of the marker that closes off a torn line: with only
    its newline out, the fragment is a whole line that no marker excuses; every later load and
    append must still work, and nothing that was written is lost."""
    path = tmp_path / "journal.jsonl"
    _, w = write_session(path, 3)
    w.close()
    fragment = b'{"at": 2.0, "type": "no'
    with open(path, "ab") as f:
        f.write(fragment)
    w2 = JournalWriter(path)
    fix_up = jmod._fresh_line_fixup(path)
    assert fix_up.startswith(b'\n{"journal_torn"') and len(fix_up) > kept
    with open(path, "ab") as f:
        f.write(fix_up[:kept])  # the writer died here
    first = load_journal(path)
    assert len(first.events) == 3
    assert w2.append(Note(text="after the second crash", at=3.0))
    w2.close()
    result = load_journal(path)
    assert [type(e).__name__ for e in result.events] == ["MessageAdded"] * 3 + ["Note"]
    assert result.events[-1].text == "after the second crash"
    assert not result.torn and result.warnings == []
    # and the repaired copy drops only the fragments
    report = repair_journal(path)
    assert [e.text for e in load_journal(report.path).events[3:]] == ["after the second crash"]


def test_a_whole_json_line_that_is_no_event_at_the_end_is_still_refused(tmp_path: Path) -> None:
    """Only a fragment is taken for torn: a whole line from a later tailrent is never skipped quietly."""
    path = tmp_path / "journal.jsonl"
    _, w = write_session(path, 2)
    w.close()
    with open(path, "ab") as f:
        f.write(b'{"type": "message_added_v9", "at": 1, "message": {"what": "a later tailrent"}}\n')
    with pytest.raises(JournalCorrupt, match="line 4"):
        load_journal(path)
    assert jmod._fresh_line_fixup(path) == b"", "a writer must not mark a whole line as torn"


def test_tail_that_is_a_whole_event_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    _, w = write_session(path, 2)
    w.close()
    with open(path, "ab") as f:
        f.write(jmod.event_line(Note(text="last", at=5.0)).rstrip(b"\n"))
    assert load_journal(path).events[-1].text == "last"
    w2 = JournalWriter(path)
    assert w2.append(Note(text="next", at=6.0))
    w2.close()
    result = load_journal(path)
    assert [e.text for e in result.events[2:]] == ["last", "next"]
    assert result.healed_lines == []


def test_corrupted_middle_line_names_file_and_line_and_repair_writes_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    s, w = write_session(path, 5)
    w.close()
    lines = path.read_bytes().split(b"\n")
    lines[3] = b'{"at": 1.0, "type": "message_added", "mess\x00age": garbage'
    path.write_bytes(b"\n".join(lines))
    original = path.read_bytes()

    with pytest.raises(JournalCorrupt) as info:
        load_journal(path)
    assert info.value.line_no == 4
    assert str(path) in str(info.value) and "line 4" in str(info.value)

    report = repair_journal(path)
    assert path.read_bytes() == original
    assert report.path == tmp_path / "journal.repaired.jsonl"
    assert [n for n, _ in report.skipped] == [4]
    repaired = load_journal(report.path)
    kept_ids = [e.message.id for e in repaired.events]
    assert kept_ids == [m.id for i, m in enumerate(s.messages) if i != 2]


def test_repair_skips_events_that_cannot_replay(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    s, w = write_session(path, 3)  # line 1 header, lines 2-4 the messages
    s.pin(s.messages[1].id)  # line 5 pins the message on line 3
    w.close()
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"not json at all"
    path.write_bytes(b"\n".join(lines))
    report = repair_journal(path)
    assert [n for n, _ in report.skipped] == [3, 5]
    assert "cannot be replayed" in dict(report.skipped)[5]
    replayed = live_session()
    for ev in load_journal(report.path).events:
        replayed.apply(ev)
    assert [m.id for m in replayed.messages] == [s.messages[0].id, s.messages[2].id]
    assert replayed.pinned == []


def test_newer_version_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps({"journal": "tailrent", "version": 2, "session": "x", "created": 0}) + "\n")
    with pytest.raises(JournalVersionError, match=r"journal version 2 is newer than this tailrent \(1\): upgrade tailrent"):
        load_journal(path)


def test_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(JournalCorrupt, match="line 1"):
        load_journal(path)


class FlakyWrite:
    """os.write that fails with `err` while `broken`, optionally after writing part of the data."""

    def __init__(self, err: int, partial: int = 0) -> None:
        self.real = os.write
        self.err = err
        self.partial = partial
        self.broken = True
        self.used_partial = False

    def __call__(self, fd: int, data) -> int:
        if self.broken:
            if self.partial and not self.used_partial:
                self.used_partial = True
                return self.real(fd, bytes(data[: self.partial]))
            raise OSError(self.err, os.strerror(self.err))
        return self.real(fd, data)


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("partial", [0, 17])
def test_write_fault_keeps_pending_and_retry_succeeds(tmp_path: Path, monkeypatch, err: int, partial: int) -> None:
    path = tmp_path / "journal.jsonl"
    s, w = write_session(path, 3)
    saved = path.read_bytes()
    flaky = FlakyWrite(err, partial)
    monkeypatch.setattr(jmod.os, "write", flaky)
    m1 = s.add("user", "written while the disk is full")
    m2 = s.add("assistant", "and this one too")
    assert w.pending == 2
    assert w.last_error is not None and w.last_error.errno == err
    assert path.read_bytes()[: len(saved)] == saved, "earlier lines must stay intact"
    assert not w.retry() and w.pending == 2
    flaky.broken = False
    assert w.retry()
    assert w.pending == 0 and w.last_error is None
    w.close()
    result = load_journal(path)
    assert [e.message.id for e in result.events][-2:] == [m1.id, m2.id]
    assert len(result.events) == 5 and not result.torn


def test_retry_happens_on_next_append(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "journal.jsonl"
    s, w = write_session(path, 1)
    flaky = FlakyWrite(errno.ENOSPC)
    monkeypatch.setattr(jmod.os, "write", flaky)
    s.add("user", "first")
    assert w.pending == 1
    flaky.broken = False
    s.add("user", "second")
    assert w.pending == 0
    w.close()
    assert [e.message.content for e in load_journal(path).events] == ["line 0: déjà vu ✓", "first", "second"]


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A real 1 MiB tmpfs, when this process may mount one (root in a container that allows it)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_real_disk_full_then_space_freed(small_tmpfs: Path) -> None:
    path = small_tmpfs / "journal.jsonl"
    s, w = write_session(path, 3)
    saved = path.read_bytes()
    filler = small_tmpfs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError) as full:  # noqa: PT011  (the errno is checked below)
            while True:
                os.write(fd, b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    big = s.add("tool", "x" * 20_000)
    assert w.pending == 1 and w.last_error.errno == errno.ENOSPC
    assert path.read_bytes()[: len(saved)] == saved
    filler.unlink()
    assert w.retry() and w.pending == 0
    w.close()
    result = load_journal(path)
    assert result.events[-1].message.id == big.id and len(result.events) == 4 and not result.torn


def test_real_read_only_mount_then_writable(small_tmpfs: Path) -> None:
    path = small_tmpfs / "journal.jsonl"
    _s, w = write_session(path, 2)
    w.close()
    saved = path.read_bytes()
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    w2 = JournalWriter(path)
    s2 = live_session()
    attach(s2, w2)
    m = s2.add("user", "typed while read-only")
    assert w2.pending == 1 and w2.last_error.errno in (errno.EROFS, errno.EACCES)
    subprocess.run(["mount", "-o", "remount,rw", str(small_tmpfs)], check=True)
    assert w2.retry() and w2.pending == 0
    w2.close()
    assert path.read_bytes()[: len(saved)] == saved
    assert load_journal(path).events[-1].message.id == m.id


async def test_async_writer_round_trip_and_fault(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "journal.jsonl"
    statuses: list[bool] = []
    w = AsyncJournalWriter(path, session_id="a1", on_status=lambda wr: statuses.append(wr.last_error is None))
    s = live_session()
    attach(s, w)
    for i in range(20):
        s.add("user", f"async {i} — ✓")
    assert await w.drain()
    assert w.pending == 0

    real_write = w._write_bytes
    state = {"broken": True}

    def broken_write(fd, data):
        if state["broken"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    # the writer's one seam where its bytes leave the process
    monkeypatch.setattr(w, "_write_bytes", broken_write)
    s.add("user", "during the fault")
    assert not await w.drain()
    assert w.pending == 1 and w.last_error.errno == errno.ENOSPC
    state["broken"] = False
    assert await w.retry()
    assert statuses == [False, True]
    assert await w.aclose()
    events = load_journal(path).events
    assert [e.message.content for e in events] == [f"async {i} — ✓" for i in range(20)] + ["during the fault"]
