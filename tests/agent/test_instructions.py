"""Project instructions (AGENTS.md, TAILRENT.md): pinned at the head, replaced when the file changes,
never folded, capped within the pin budget; one implementation for the app, `ask` and the demo.
Blank sessions (nothing sent) are not kept."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.loop import Agent, wire_messages
from tailrent_tui.cli import cli
from tailrent_tui.core.messages import EventAdapter, InstructionsRead, Kind
from tailrent_tui.core.session import Session, SessionError, replay
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.mock import MockModel
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import list_sessions, session_dirs


def _agent(ws: Path, window: int = 8192, events: list | None = None) -> Agent:
    session = Session(counter=get_counter("chars4"), system="sys", window=window)
    if events is not None:
        session.listeners.append(events.append)
    return Agent(session=session, model=MockModel(), settings=Settings(tokenizer="chars4"), workspace=ws, instructions=True)


def _touch_later(path: Path, text: str) -> None:
    st = path.stat()
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_agents_md_is_pinned_at_the_head_and_replaced_when_it_changes(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Use tabs.\nRun pytest before commits.\n")
    events: list = []
    agent = _agent(tmp_path, events=events)
    first = agent.session.messages[0]
    assert first.kind == Kind.instructions and first.pinned and first.meta["source"] == "AGENTS.md"
    assert "Run pytest before commits." in first.content
    asyncio.run(agent.turn("hello"))
    assert agent.stores.refresh_instructions() == []  # unchanged on disk: nothing read, nothing emitted
    _touch_later(tmp_path / "AGENTS.md", "Use spaces.\n")
    asyncio.run(agent.turn("again"))
    s = agent.session
    instructions = [m for m in s.messages if m.kind == Kind.instructions]
    assert len(instructions) == 1 and "Use spaces." in instructions[0].content  # replaced, not duplicated
    assert s.messages[0] is instructions[0]  # still at the head
    assert sum(isinstance(e, InstructionsRead) for e in events) == 2  # read at start, read again once
    # the model reads it as the first message after the system prompt
    assert wire_messages(s)[1] == {"role": "user", "content": instructions[0].content}
    # the journal alone rebuilds it
    rebuilt = replay(
        [EventAdapter.validate_json(json.dumps(e.model_dump(mode="json"))) for e in events], counter=get_counter("chars4")
    )
    assert [m.content for m in rebuilt.messages if m.kind == Kind.instructions] == [instructions[0].content]
    # a deleted file's message goes
    (tmp_path / "AGENTS.md").unlink()
    assert agent.stores.refresh_instructions() == ["AGENTS.md"]
    assert not s.instructions


def test_instructions_are_never_folded_unpinned_or_spilled(tmp_path: Path) -> None:
    (tmp_path / "TAILRENT.md").write_text("Answer in French.\n")
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    agent = _agent(tmp_path)
    s = agent.session
    assert [m.meta["source"] for m in s.messages] == ["AGENTS.md", "TAILRENT.md"]
    for i in range(6):
        s.add("user" if i % 2 == 0 else "assistant", f"message {i} " + "words " * 40)
    asyncio.run(agent.ladder.fold())
    assert [m.meta["source"] for m in s.messages[:2]] == ["AGENTS.md", "TAILRENT.md"]
    assert s.folds and not set(s.folds[-1].span_ids) & {m.id for m in s.messages[:2]}
    with pytest.raises(SessionError, match=r"project instructions stay pinned: edit or remove AGENTS\.md"):
        s.unpin(s.messages[0].id)
    with pytest.raises(SessionError, match="project instructions"):
        agent.ladder.spill(s.messages[0].id)


def test_instructions_are_capped_at_half_the_pin_budget(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("".join(f"rule {i}: keep it short and clear.\n" for i in range(2000)))
    agent = _agent(tmp_path, window=4096)
    s = agent.session
    m = s.messages[0]
    assert s.sent_tokens(m) <= s.pin_budget // 2 + s.framing.message("user")
    assert "[AGENTS.md cut at ~" in m.content and "half the pin budget" in m.content
    assert m.content.splitlines()[-2].startswith("rule ")  # cut at a whole line


def test_the_instructions_cap_leaves_the_reply_its_room_from_the_start(tmp_path: Path) -> None:
    """The pin budget leaves the reply its room once the ladder has run; the file was cut at start,
    before it had, to half of a bigger budget: past half of the budget from the first turn on."""
    (tmp_path / "AGENTS.md").write_text("".join(f"rule {i}: keep it short and clear.\n" for i in range(2000)))
    agent = _agent(tmp_path, window=4096)
    s = agent.session
    assert s.reply_reserve == agent.budget.policy_context().settings.reply_reserve > 0
    assert s.sent_tokens(s.messages[0]) <= s.pin_budget // 2 + s.framing.message("user")


def test_ask_reads_agents_md_and_an_app_start_leaves_no_blank_session(tmp_path: Path) -> None:
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Use tabs.\n")
    settings = Settings(model="mock", data_dir=str(data), workspace=str(ws), tokenizer="chars4")
    # opened and closed with nothing sent (an app started and quit): not kept, not listed
    agent = build_agent(settings, {}, async_writer=False, new=True)
    assert agent.session.messages[0].kind == Kind.instructions
    report = asyncio.run(agent.aclose()).report
    assert report is not None and report.discarded
    assert session_dirs(data) == []
    env = {"TAILRENT_HOME": str(data), "TAILRENT_CONFIG_DIR": str(tmp_path / "config")}
    result = CliRunner().invoke(cli, ["--workspace", str(ws), "ask", "--model", "mock", "--json", "hi"], env=env)
    assert result.exit_code == 0, result.output
    (info,) = list_sessions(data)
    assert info.messages == 2 and info.pinned == 1  # the instructions are pinned, not counted as a message
