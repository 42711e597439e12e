"""Instruction files obey the workspace's confinement (issue 27, item 6).

AGENTS.md and TAILRENT.md are read into the context without a tool call, so they
are opened the way the tools open files: a symlink out of the workspace, a FIFO,
a device or a hard link is refused, the file's content never reaches the context
or the journal, and the refusal is one line in the transcript naming the file.
`@path` goes through read_file itself and is refused the same way.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tailrent_tui.core.messages import Kind
from tests.agent.test_instructions import _agent

SECRET = "OPENAI_API_KEY=sk-secret-outside"


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    return outside / "secret.txt"


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def _plant(kind: str, ws: Path, tmp_path: Path, name: str) -> None:
    target = ws / name
    if kind == "symlink out":
        target.symlink_to(Path("..") / "outside" / "secret.txt")
    elif kind == "absolute symlink out":
        target.symlink_to(_outside_path(tmp_path))
    elif kind == "symlink to /proc/self/environ":
        target.symlink_to("/proc/self/environ")
    elif kind == "symlinked directory out":
        (ws / "docs").symlink_to(tmp_path / "outside")
        target.symlink_to(Path("docs") / "secret.txt")
    elif kind == "FIFO":
        os.mkfifo(target)
    elif kind == "hard link":
        os.link(_outside_path(tmp_path), target)
    elif kind == "device":
        target.symlink_to("/dev/zero")


def _outside_path(tmp_path: Path) -> Path:
    return tmp_path / "outside" / "secret.txt"


KINDS = [
    "symlink out",
    "absolute symlink out",
    "symlink to /proc/self/environ",
    "symlinked directory out",
    "FIFO",
    "hard link",
    "device",
]


@pytest.mark.fault("instruction files confined")
@pytest.mark.parametrize("name", ["AGENTS.md", "TAILRENT.md"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_instruction_file_that_leaves_the_workspace_is_refused_in_one_line(tmp_path, monkeypatch, kind, name):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-outside")
    _outside(tmp_path)
    ws = _ws(tmp_path)
    _plant(kind, ws, tmp_path, name)
    events: list = []
    agent = _agent(ws, events=events)
    asyncio.run(agent.turn("hello"))
    assert not [m for m in agent.session.messages if m.kind == Kind.instructions]
    sent = "\n".join(str(e.model_dump(mode="json")) for e in events)
    assert "sk-secret-outside" not in sent, "nothing of the file reaches the journal"
    notes = [e.text for e in events if type(e).__name__ == "Note" and name in e.text]
    assert len(notes) == 1 and notes[0].startswith(f"{name} not read: ") and "\n" not in notes[0]
    agent.stores.refresh_instructions()
    assert len([e for e in events if type(e).__name__ == "Note" and name in e.text]) == 1, "said once"


def test_a_symlink_that_stays_inside_the_workspace_is_still_read(tmp_path):
    ws = _ws(tmp_path)
    (ws / "docs").mkdir()
    (ws / "docs" / "agents.md").write_text("Use tabs.\n")
    (ws / "AGENTS.md").symlink_to(Path("docs") / "agents.md")
    agent = _agent(ws)
    (first,) = [m for m in agent.session.messages if m.kind == Kind.instructions]
    assert "Use tabs." in first.content


@pytest.mark.fault("instruction files confined")
@pytest.mark.parametrize("kind", ["symlink out", "FIFO", "device", "symlink to /proc/self/environ"])
async def test_an_at_path_that_leaves_the_workspace_or_is_special_is_refused(make_agent, workspace, tmp_path, kind):
    _outside(tmp_path)
    _plant(kind, workspace, tmp_path, "att.txt")
    agent = make_agent()
    message = await agent.tools.attach_file("att.txt")
    assert message.content.startswith("error:") and "att.txt" in message.content
    assert SECRET not in message.content


@pytest.mark.fault("@file")
@pytest.mark.parametrize("kind", ["binary", "2 GB sparse", "/dev/zero", "FIFO", "missing", "outside by .."])
async def test_an_at_path_of_every_hostile_kind_is_one_line_and_quick(make_agent, workspace, tmp_path, kind):
    import time

    _outside(tmp_path)
    name = "att.bin"
    if kind == "binary":
        (workspace / name).write_bytes(bytes(range(256)) * 64)
    elif kind == "2 GB sparse":
        with open(workspace / name, "wb") as f:
            f.write(b"hello\n")
            f.truncate(2 * 1024**3)
    elif kind == "/dev/zero":
        (workspace / name).symlink_to("/dev/zero")
    elif kind == "FIFO":
        os.mkfifo(workspace / name)
    elif kind == "outside by ..":
        name = "../outside/secret.txt"
    agent = make_agent()
    started = time.monotonic()
    message = await agent.tools.attach_file(name)
    assert time.monotonic() - started < 5, "never a read of the whole 2 GB, never a hang"
    assert message.content.startswith("error:") and "\n" not in message.content
    assert SECRET not in message.content
