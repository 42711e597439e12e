"""Every turn is bounded (issue 27, item 3): spills per turn and per session (every tool's), the
reply's size, the tool calls' argument size and number, and the turn's overall time."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tailrent_tui.agent.loop import TurnCallbacks
from tests.agent.test_tools_shell_faults import Approver, call, calls, tool_messages


def _spill_bytes(agent) -> int:
    spill = Path(agent.session_dir.path) / "spill"
    return sum(p.stat().st_size for p in spill.iterdir()) if spill.is_dir() else 0


@pytest.mark.fault("turn bounds")
async def test_a_turns_spills_stop_at_the_turn_cap_for_every_tool(make_agent, workspace):
    (workspace / "big.txt").write_text(("x" * 99 + "\n") * 2000)  # 200 KB
    reads = [call("read_file", path="big.txt") for _ in range(40)]  # 8 MB unbounded
    agent = make_agent([calls(*reads), "done"], caps={"spills_turn_max_bytes": 1_000_000})
    await agent.turn("Read it all.", TurnCallbacks())
    assert _spill_bytes(agent) < 1_100_000, "the turn's spills stop near the cap"
    results = tool_messages(agent)
    assert len(results) == 40
    assert "spills_turn_max_bytes is used up" in results[-1].content
    # the next turn has its own budget
    agent.model = type(agent.model)([calls(call("read_file", path="big.txt")), "done"])
    await agent.turn("Once more.", TurnCallbacks())
    assert "used up" not in tool_messages(agent)[-1].content


@pytest.mark.fault("turn bounds")
async def test_a_sessions_spills_stop_at_the_session_cap_across_turns(make_agent, workspace):
    (workspace / "big.txt").write_text(("y" * 99 + "\n") * 2000)
    script = [calls(*[call("read_file", path="big.txt")] * 4), "ok"] * 3
    agent = make_agent(script, caps={"spills_session_max_bytes": 1_000_000})
    for _ in range(3):
        await agent.turn("Read.", TurnCallbacks())
    assert _spill_bytes(agent) < 1_100_000
    assert "spills_session_max_bytes is used up" in tool_messages(agent)[-1].content


@pytest.mark.fault("turn bounds")
async def test_a_reply_past_the_reply_cap_is_cut_and_marked(make_agent):
    agent = make_agent([{"text": "z" * 300_000}], caps={"reply_max_bytes": 10_000})
    result = await agent.turn("Talk.", TurnCallbacks())
    reply = result.reply
    assert reply is not None and len(reply.content) == 10_000 and reply.meta.get("truncated")
    assert not reply.pinned
    assert any("reply_max_bytes" in n for n in result.notices)


@pytest.mark.fault("turn bounds")
async def test_a_huge_tool_call_argument_is_not_run_nor_journaled(make_agent, workspace):
    agent = make_agent([calls(call("write_file", path="out.txt", content="w" * 3_000_000)), "ok"])
    approver = Approver("once")
    await agent.turn("Write.", TurnCallbacks(approve=approver))
    assert approver.asked == [], "never put to the user"
    assert not (workspace / "out.txt").exists()
    (result,) = tool_messages(agent)
    assert "tool_call_args_max_bytes" in result.content
    journal = Path(agent.session_dir.path) / "journal.jsonl"
    assert journal.stat().st_size < 200_000, "the 3 MB argument is not in the journal"


@pytest.mark.fault("turn bounds")
async def test_a_reply_with_thousands_of_tool_calls_runs_the_first_ones(make_agent, workspace):
    (workspace / "a.txt").write_text("a\n")
    agent = make_agent([calls(*[call("read_file", path="a.txt")] * 1000), "ok"])
    result = await agent.turn("Go.", TurnCallbacks())
    assert len(tool_messages(agent)) == 64
    assert any("1,000 tool calls" in n and "tool_calls_max_per_reply" in n for n in result.notices)
    replies = [m for m in agent.session.messages if m.role == "assistant" and m.tool_calls]
    assert len(replies[0].tool_calls) == 64, "every call kept has its result"


@pytest.mark.fault("turn bounds")
async def test_a_turn_past_its_deadline_stops_and_kills_what_it_ran(make_agent, workspace):
    agent = make_agent([calls(call("run_shell", command="sleep 30")), "never"], caps={"turn_deadline": 1.0})
    started = time.monotonic()
    result = await agent.turn("Wait.", TurnCallbacks(approve=Approver("once")))
    assert time.monotonic() - started < 10
    assert any("turn_deadline" in n for n in result.notices)
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] == ["sleep", "30"] and p.ppid() in (1, psutil.Process().pid)
    ], "the command was killed"
    # the session takes the next message
    agent.model = type(agent.model)(["fine"])
    assert (await agent.turn("Next.", TurnCallbacks())).reply.content == "fine"
