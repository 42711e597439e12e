"""The decisions file under hostile input (issue 13): a pin writes the decision to a file in the
workspace (`agent/stores.py`); a directory, a symlink out, a FIFO or a hard link in its place is
one notice, the pin still stands. Marked `fault(...)` for benchmarks/fault_bench.py.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from tailrent_tui.core.messages import Note

SECRET = "SECRET-outside-the-workspace"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "f.txt").write_text(SECRET + "\n")
    return out


def _temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if "tailrent-tmp" in p.name or p.name.endswith(".tmp"))


# ----------------------------------------------------------- decisions file

DECISION = "DECISION: we use port 8443 because the proxy wants it"


def _pin(agent) -> tuple[list[Note], object]:
    """Pin a chat message through the agent (in a thread: a FIFO must not hang the test)."""
    m = agent.session.add("user", "we keep the port as it is")
    notes: list[Note] = []
    agent.session.listeners.append(lambda ev: notes.append(ev) if isinstance(ev, Note) else None)
    box: list[object] = []

    def go() -> None:
        try:
            box.append(agent.ladder.pin(m.id))
        except BaseException as exc:
            box.append(exc)

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "pin hung on the decisions file"
    assert not isinstance(box[0], BaseException), f"pin raised {box[0]!r}"
    assert agent.session.get(m.id).pinned, "the pin must stand"
    return [n for n in notes if n.level == "warning"], box[0]


def _one_warning(notes: list[Note], *words: str) -> str:
    assert len(notes) == 1, notes
    text = notes[0].text
    assert "\n" not in text and "Traceback" not in text
    assert "decisions file" in text
    for w in words:
        assert w in text, text
    return text


@pytest.mark.fault("decisions file")
@pytest.mark.parametrize(
    "case",
    [
        "a directory",
        "a symlink to an outside file",
        "a parent symlinked outside",
        "a FIFO",
        "a parent that is a file",
        "a symlink loop",
    ],
)
async def test_a_decisions_file_that_cannot_be_written_is_a_notice(make_agent, workspace: Path, outside: Path, case: str) -> None:
    name = "docs/DECISIONS.md"
    target = workspace / name
    if case != "a parent that is a file":
        (workspace / "docs").mkdir()
    if case == "a directory":
        target.mkdir()
    elif case == "a symlink to an outside file":
        target.symlink_to(outside / "f.txt")
    elif case == "a parent symlinked outside":
        (workspace / "docs").rmdir()
        (workspace / "docs").symlink_to(outside)
    elif case == "a FIFO":
        os.mkfifo(target)
    elif case == "a parent that is a file":
        (workspace / "docs").write_text("a file\n")
    elif case == "a symlink loop":
        target.symlink_to("DECISIONS.md")
    agent = make_agent(decisions_file=name)
    notes, _ = _pin(agent)
    _one_warning(notes, name)
    assert (outside / "f.txt").read_text() == SECRET + "\n"
    assert [p.name for p in outside.iterdir()] == ["f.txt"]


@pytest.mark.fault("decisions file")
async def test_a_hard_link_as_decisions_file_is_replaced_not_written_through(make_agent, workspace: Path, outside: Path) -> None:
    os.link(outside / "f.txt", workspace / "DECISIONS.md")
    agent = make_agent(decisions_file="DECISIONS.md")
    notes, _ = _pin(agent)
    assert notes == []
    assert (outside / "f.txt").read_text() == SECRET + "\n"
    assert "we keep the port" in (workspace / "DECISIONS.md").read_text()


@pytest.mark.fault("decisions file")
async def test_a_failed_decisions_write_keeps_the_old_file(make_agent, workspace: Path, monkeypatch) -> None:
    (workspace / "DECISIONS.md").write_text("# old decisions\n")
    agent = make_agent(decisions_file="DECISIONS.md")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    notes, _ = _pin(agent)
    _one_warning(notes, "No space left")
    assert (workspace / "DECISIONS.md").read_text() == "# old decisions\n"
    assert _temps(workspace) == []


@pytest.mark.fault("decisions file")
@pytest.mark.parametrize("case", ["missing parent directory", "a symlink inside the workspace", "a file"])
async def test_a_decisions_file_that_can_be_written_is(make_agent, workspace: Path, case: str) -> None:
    name = "notes/DECISIONS.md"
    where = workspace / name
    if case == "a symlink inside the workspace":
        (workspace / "notes").mkdir()
        (workspace / "real.md").write_text("old\n")
        where.symlink_to("../real.md")
        where = workspace / "real.md"
    elif case == "a file":
        (workspace / "notes").mkdir()
        where.write_text("old\n")
        where.chmod(0o640)
    agent = make_agent(decisions_file=name)
    notes, _ = _pin(agent)
    assert notes == []
    assert "we keep the port" in where.read_text()
    if case == "a file":
        assert (where.stat().st_mode & 0o777) == 0o640  # an existing file keeps its mode
    assert _temps(where.parent) == []
