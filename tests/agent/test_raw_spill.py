"""A run_shell output past its in-memory cap streams whole into a raw spill file;
only a pointer enters the context, and read_spill brings back any line range."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.tools.base import ToolCaps
from tailrent_tui.core.messages import Kind
from tailrent_tui.models.mock import MockModel
from tailrent_tui.settings import Settings


@pytest.fixture
def agent(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(model="mock", data_dir=tmp_path / "data", workspace=ws, fsync=False, yolo=True)
    a = build_agent(settings, async_writer=False, new=True, caps=ToolCaps(shell_max_bytes=4096))
    yield a
    asyncio.run(a.aclose())


async def test_streamed_shell_output_enters_as_a_pointer_and_reads_back_by_range(agent):
    agent.model = MockModel(
        [
            {"tool_calls": [{"name": "run_shell", "arguments": {"command": "seq 1 200000"}}]},
            {"text": "done"},
        ]
    )
    result = await agent.turn("count to 200000", None)
    assert result.error is None
    pointer = next(m for m in agent.session.messages if m.role == "tool")
    assert pointer.kind == Kind.spill_pointer and pointer.spill_id
    raw = agent.spill_store.raw_path_for(pointer.spill_id)
    assert raw.read_bytes() == b"".join(f"{i}\n".encode() for i in range(1, 200001))
    assert pointer.tokens < 400, "the pointer, not the output, enters the context"
    assert pointer.spill_id in agent.session.spills

    agent.model = MockModel(
        [
            {"tool_calls": [{"name": "read_spill", "arguments": {"id": pointer.spill_id, "start": 199998, "end": 200000}}]},
            {"text": "ok"},
        ]
    )
    await agent.turn("show the last three", None)
    back = [m for m in agent.session.messages if m.role == "tool"][-1]
    assert back.content.splitlines()[:3] == ["199998", "199999", "200000"]


async def test_reading_a_huge_raw_spill_whole_is_refused_clearly(agent, monkeypatch):
    fobj, spill_id = agent.spill_store.open_raw()
    with fobj:
        fobj.write(b"x" * 2048)
    monkeypatch.setattr(type(agent.spill_store), "RAW_READ_LIMIT", 1024)
    with pytest.raises(OSError, match="too big to read whole"):
        agent.spill_store.read_spill(spill_id)
