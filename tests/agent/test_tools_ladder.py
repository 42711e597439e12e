"""Tools in the agent loop: the ladder on entry (inline or spilled), approvals,
bad calls answered with tool errors, and rungs 2 to 4 seen from the model
(read_spill, delegate, remember/recall, search_history after a fold).

The mock model drives the tools from a script; agents are built as the app
builds them, in a tmp data dir, so spills, memory and the fold archive are
real files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tailrent_tui.agent import tools as tool_registry
from tailrent_tui.agent.loop import ApprovalRequest, TurnCallbacks
from tailrent_tui.agent.tools import Tool, ToolSpec
from tailrent_tui.core.messages import Folded, Kind
from tailrent_tui.models.mock import MockModel
from tailrent_tui.store.sessions import SessionDir
from tests.support.fake_ollama import Reply, fake_ollama  # noqa: F401

# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "auth.py").write_text("TTL_MINUTES = 15\n\ndef refresh(token):\n    return store.get(token)\n")
    (ws / "notes.md").write_text("Refresh tokens live in Redis.\nThe TTL is 15 minutes.\n")
    (ws / "src").mkdir()
    (ws / "src" / "queue.py").write_text("RETRIES = 3\n")
    return ws


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def calls(*items: dict) -> dict:
    return {"tool_calls": list(items)}


def tool_messages(agent) -> list:
    return [m for m in agent.session.messages if m.role == "tool"]


def wire_tool_messages(request: list[dict]) -> list[dict]:
    return [m for m in request if m["role"] == "tool"]


class Approver:
    """An approval callback that answers from a list and records what it was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> str:
        self.asked.append(request)
        return self.answers.pop(0)


async def never_asked(request: ApprovalRequest) -> str:
    raise AssertionError(f"asked to approve {request.tool} although no approval was expected")


# -- tools driven by the mock ----------------------------------------------------------------


async def test_mock_drives_read_file_list_dir_grep(make_agent):
    agent = make_agent(
        [calls(call("read_file", path="notes.md"), call("list_dir", path="."), call("grep", pattern="TTL")), "Done reading."]
    )
    rec_calls = []
    result = await agent.turn("Look around.", TurnCallbacks(on_tool_call=rec_calls.append, approve=never_asked))
    assert result.error is None and result.reply.content == "Done reading."

    assistant = agent.session.messages[1]
    ids = [c.id for c in assistant.tool_calls]
    assert [c.name for c in assistant.tool_calls] == ["read_file", "list_dir", "grep"]
    assert [c.id for c in rec_calls] == ids
    results = tool_messages(agent)
    assert [m.tool_call_id for m in results] == ids
    assert all(m.kind == Kind.tool_result for m in results)
    read, listing, grep = results
    assert "Refresh tokens live in Redis." in read.content and "The TTL is 15 minutes." in read.content
    assert "auth.py" in listing.content and "src" in listing.content
    assert "TTL_MINUTES = 15" in grep.content and "The TTL is 15 minutes." in grep.content

    # the second request carries the assistant's calls and each result, matched by id
    second = agent.model.requests[1]
    sent_calls = next(m for m in second if m["role"] == "assistant" and m.get("tool_calls"))
    assert [c["id"] for c in sent_calls["tool_calls"]] == ids
    sent = wire_tool_messages(second)
    assert [(m["tool_call_id"], m["content"], m["tool_name"]) for m in sent] == [
        (m.tool_call_id, m.content, m.tool) for m in results
    ]


async def spilled_big_log(make_agent, workspace, **overrides):
    """An agent whose first turn read big.log and spilled it; returns (agent, pointer, stored text)."""
    lines = [f"row {i:04d}: the worker retried job {i} after the broker restarted" for i in range(1, 301)]
    (workspace / "big.log").write_text("\n".join(lines) + "\n")
    agent = make_agent([calls(call("read_file", path="big.log")), "It is long."], tools={"spill_threshold": 200}, **overrides)
    await agent.turn("Read big.log.")
    (pointer,) = tool_messages(agent)
    stored = json.loads((agent.session_dir.path / "spill" / f"{pointer.spill_id}.json").read_text())["content"]
    assert all(line in stored for line in lines)
    return agent, pointer, stored


async def test_a_big_result_enters_as_a_spill_pointer(make_agent, workspace):
    agent, pointer, stored = await spilled_big_log(make_agent, workspace)
    assistant = agent.session.messages[1]
    assert pointer.kind == Kind.spill_pointer
    assert pointer.tool_call_id == assistant.tool_calls[0].id
    assert pointer.spill_id and pointer.spill_id in agent.session.spills
    assert pointer.tokens < 200 and "row 0150" not in pointer.content
    assert agent.session.count(stored) > 200
    sent = wire_tool_messages(agent.model.requests[1])
    assert [(m["content"], m["tool_call_id"]) for m in sent] == [(pointer.content, pointer.tool_call_id)]


async def test_read_spill_a_range_by_an_id_prefix(make_agent, workspace):
    agent, pointer, stored = await spilled_big_log(make_agent, workspace)
    agent.model = MockModel([calls(call("read_spill", id=pointer.spill_id[:8], start=3, end=5)), "Read it back."])
    result = await agent.turn("Show lines 3 to 5.")
    assert result.error is None
    part = tool_messages(agent)[-1]
    assert part.kind == Kind.tool_result
    stored_lines = stored.splitlines()
    assert all(line in part.content for line in stored_lines[2:5])
    assert stored_lines[1] not in part.content and stored_lines[5] not in part.content


async def test_read_spill_empty_range_is_a_tool_error(make_agent, workspace):
    agent, pointer, _ = await spilled_big_log(make_agent, workspace)
    agent.model = MockModel([calls(call("read_spill", id=pointer.spill_id, start=900, end=910)), "ok"])
    result = await agent.turn("Show lines 900 to 910.")
    assert result.error is None
    answer = tool_messages(agent)[-1]
    assert answer.content.startswith("error:") and "900" in answer.content


async def test_read_spill_whole_brings_the_content_back(make_agent, workspace):
    agent, pointer, stored = await spilled_big_log(make_agent, workspace)
    agent.model = MockModel([calls(call("read_spill", id=pointer.spill_id)), "Read it back."])
    result = await agent.turn("Show it again.")
    assert result.error is None
    whole = tool_messages(agent)[-1]
    assert whole.kind == Kind.tool_result
    assert stored.splitlines()[0] in whole.content
    assert len(agent.session.spills) == 1, "reading a spill back must not spill it again"


@pytest.mark.parametrize("damage", ["missing", "altered"])
async def test_read_spill_of_a_missing_or_altered_file_is_a_tool_error(make_agent, workspace, damage):
    (workspace / "big.txt").write_text("".join(f"line {i} of a long file about caches\n" for i in range(400)))
    agent = make_agent([calls(call("read_file", path="big.txt")), "ok"], tools={"spill_threshold": 500})
    await agent.turn("Read big.txt.")
    (pointer,) = tool_messages(agent)
    assert pointer.kind == Kind.spill_pointer
    path = agent.session_dir.path / "spill" / f"{pointer.spill_id}.json"
    if damage == "missing":
        path.unlink()
    else:
        record = json.loads(path.read_text())
        record["content"] = record["content"].replace("caches", "queues")
        path.write_text(json.dumps(record))

    agent.model = MockModel([calls(call("read_spill", id=pointer.spill_id)), "Understood."])
    result = await agent.turn("Read it back.")
    assert result.error is None and result.reply.content == "Understood."
    answer = tool_messages(agent)[-1]
    assert answer.content.startswith("error:")
    assert pointer.spill_id in answer.content and damage in answer.content
    assert "queues" not in answer.content


# -- approvals ----------------------------------------------------------------------------


async def test_denied_write_returns_a_tool_error_and_writes_nothing(make_agent, workspace):
    agent = make_agent([calls(call("write_file", path="new.txt", content="hello\n")), "I will not write it."])
    approver = Approver("deny")
    result = await agent.turn("Create new.txt.", TurnCallbacks(approve=approver))
    assert result.error is None
    (asked,) = approver.asked
    assert asked.tool == "write_file" and asked.arguments == {"path": "new.txt", "content": "hello\n"}
    assert not (workspace / "new.txt").exists()
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:") and "denied" in answer.content
    assert wire_tool_messages(agent.model.requests[1])[0]["content"] == answer.content


async def test_edit_file_asks_with_the_diff_and_applies_once_allowed(make_agent, workspace):
    agent = make_agent(
        [
            calls(call("edit_file", path="auth.py", old="TTL_MINUTES = 15", new="TTL_MINUTES = 30")),
            calls(call("edit_file", path="auth.py", old="TTL_MINUTES = 30", new="TTL_MINUTES = 45")),
            "Edited twice.",
        ]
    )
    approver = Approver("once", "deny")
    result = await agent.turn("Change the TTL.", TurnCallbacks(approve=approver))
    assert result.error is None
    first, second = approver.asked
    assert first.tool == "edit_file"
    assert "-TTL_MINUTES = 15" in first.diff and "+TTL_MINUTES = 30" in first.diff
    # "once" allows this call only: the next edit asks again (and is denied)
    assert "-TTL_MINUTES = 30" in second.diff
    assert (workspace / "auth.py").read_text().startswith("TTL_MINUTES = 30\n")
    ok, denied = tool_messages(agent)
    assert not ok.content.startswith("error:")
    assert denied.content.startswith("error:") and "denied" in denied.content


async def test_edit_file_that_cannot_apply_is_an_error_without_asking(make_agent, workspace):
    agent = make_agent([calls(call("edit_file", path="auth.py", old="NOT THERE", new="x")), "ok"])
    result = await agent.turn("Edit.", TurnCallbacks(approve=never_asked))
    assert result.error is None
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:")
    assert (workspace / "auth.py").read_text().startswith("TTL_MINUTES = 15\n")


async def test_prefix_approval_covers_the_same_command_for_the_session(make_agent):
    agent = make_agent(
        [
            calls(call("run_shell", command="echo first")),
            "ran one",
            calls(call("run_shell", command="echo second")),
            calls(call("run_shell", command="pwd")),
            "ran two more",
        ]
    )
    approver = Approver("prefix", "deny")
    await agent.turn("Run echo.", TurnCallbacks(approve=approver))
    await agent.turn("Run echo again, then pwd.", TurnCallbacks(approve=approver))

    # asked for `echo` once, then again only for another command (`pwd`)
    assert [(a.tool, a.command_prefix) for a in approver.asked] == [
        ("run_shell", "`echo` (read-only)"),
        ("run_shell", "`pwd` (read-only)"),
    ]
    first, second, third = tool_messages(agent)
    assert "first" in first.content and "second" in second.content
    assert third.content.startswith("error:") and "denied" in third.content


async def test_yolo_runs_without_asking(make_agent, workspace):
    agent = make_agent(
        [calls(call("write_file", path="out.txt", content="written\n"), call("run_shell", command="cat out.txt")), "ok"],
        yolo=True,
    )
    result = await agent.turn("Write and show.", TurnCallbacks(approve=never_asked))
    assert result.error is None
    assert (workspace / "out.txt").read_text() == "written\n"
    assert "written" in tool_messages(agent)[1].content


async def test_default_callbacks_deny(make_agent, workspace):
    agent = make_agent([calls(call("run_shell", command="touch made.txt")), "ok"])
    await agent.turn("Touch a file.")
    assert not (workspace / "made.txt").exists()
    assert "denied" in tool_messages(agent)[0].content


# -- bad calls: a tool error back to the model, never a crash --------------------------------


async def test_invalid_json_arguments_from_the_server(make_agent, fake_ollama, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", fake_ollama.url)
    agent = make_agent(model="ollama:llama3.2:latest", window=4096)
    fake_ollama.push(
        Reply(content="", tool_calls=[{"name": "read_file", "arguments": '{"path": "notes.md"'}]),
        Reply(content="Sorry, retrying later."),
    )
    result = await agent.turn("Read notes.md.", TurnCallbacks(approve=never_asked))
    assert result.error is None and result.reply.content == "Sorry, retrying later."
    assistant = agent.session.messages[1]
    (tc,) = assistant.tool_calls
    assert tc.id in assistant.meta.get("argument_errors", {})
    (answer,) = tool_messages(agent)
    assert answer.tool_call_id == tc.id
    assert answer.content.startswith("error:") and "JSON" in answer.content
    # the model got the error as the tool's answer
    sent = [m for m in fake_ollama.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in sent] == [answer.content]


async def test_unknown_tool_is_a_tool_error(make_agent):
    agent = make_agent([calls(call("teleport", to="prod")), "Fine."])
    result = await agent.turn("Go.")
    assert result.error is None and result.reply.content == "Fine."
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:")
    assert "teleport" in answer.content and "read_file" in answer.content


async def test_bad_arguments_for_a_known_tool_are_a_tool_error(make_agent):
    agent = make_agent([calls(call("read_file", path=42), call("grep")), "ok"])
    result = await agent.turn("Go.")
    assert result.error is None
    wrong_type, missing = tool_messages(agent)
    assert wrong_type.content.startswith("error:") and "path" in wrong_type.content
    assert missing.content.startswith("error:") and "pattern" in missing.content


async def test_a_tool_that_raises_is_a_tool_error(make_agent, monkeypatch):
    def explode(args, ctx):
        raise RuntimeError("disk on fire")

    spec = ToolSpec(name="explode", description="always fails", parameters={"type": "object", "properties": {}})
    monkeypatch.setitem(tool_registry.TOOLS, "explode", Tool(spec=spec, run=explode))
    agent = make_agent([calls(call("explode")), "It failed."])
    assert "explode" in [t["name"] for t in agent.tools.offered_tools()]
    result = await agent.turn("Try it.")
    assert result.error is None and result.reply.content == "It failed."
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:") and "disk on fire" in answer.content


async def test_a_session_tool_that_raises_is_a_tool_error(make_agent, monkeypatch):
    agent = make_agent([calls(call("search_history", query="TTL")), "ok"])

    async def broken(args, ctx):
        raise RuntimeError("index corrupted")

    spec = tool_registry.TOOLS["search_history"].spec
    monkeypatch.setitem(tool_registry.TOOLS, "search_history", Tool(spec=spec, run_async=broken))
    result = await agent.turn("Search.")
    assert result.error is None and result.reply.content == "ok"
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:") and "index corrupted" in answer.content


# -- rung 3: delegate -----------------------------------------------------------------------


async def test_delegate_parent_grows_only_by_the_capped_answer(make_agent, workspace, monkeypatch):
    big = "".join(f"config line {i}: retry_backoff_ms={i * 10} for queue shard {i}\n" for i in range(120))
    (workspace / "config.txt").write_text(big)
    long_answer = "The shards back off linearly. " * 80
    agent = make_agent(
        [
            calls(call("delegate", task="Read config.txt and tell me how backoff grows.")),  # parent
            calls(call("read_file", path="config.txt")),  # sub
            calls(call("delegate", task="Go deeper.")),  # sub tries to delegate further
            long_answer,  # sub's final answer
            "Backoff grows linearly.",  # parent's final answer
        ],
    )
    monkeypatch.setattr("tailrent_tui.agent.loop.DELEGATE_ANSWER_CAP", 60)
    result = await agent.turn("How does backoff grow?", TurnCallbacks(approve=never_asked))
    assert result.error is None and result.reply.content == "Backoff grows linearly."

    parent = agent.session.messages
    assert [(m.role, m.kind) for m in parent] == [
        ("user", Kind.chat),
        ("assistant", Kind.chat),
        ("tool", Kind.delegate_result),
        ("assistant", Kind.chat),
    ]
    delegated = parent[2]
    assert delegated.tool_call_id == parent[1].tool_calls[0].id
    assert "The shards back off linearly." in delegated.content
    header = delegated.content.split("\n", 1)[0]  # "[delegate sub-…: N messages, T tokens in its own context]"
    assert delegated.tokens <= 60 + agent.session.count(header) + 20, "the answer is capped (plus its header and a cut line)"
    assert delegated.tokens < agent.session.count(long_answer)
    # the file the sub-session read never entered the parent's context
    assert "config line 77" not in agent.session.visible_text()
    for request in (agent.model.requests[0], agent.model.requests[-1]):
        assert not any("config line 77" in m["content"] for m in request)

    # the sub-session's own tokens are counted apart, and include the file it read
    assert len(agent.sub_sessions) == 1
    assert agent.sub_tokens > agent.session.count(big)
    assert len([u for u in agent.session.usage if u.sub_session is None]) == 2, "the parent's own requests"

    # the sub-session's nested delegate got a tool error
    sub_after_nested = agent.model.requests[3]
    nested = wire_tool_messages(sub_after_nested)[-1]
    assert nested["content"].startswith("error:") and "cannot delegate" in nested["content"]
    assert not any(m["content"] == "How does backoff grow?" for m in sub_after_nested), "a fresh context"


def delegate_script(answer: str = "The sub-session's answer.") -> list:
    return [calls(call("delegate", task="List the workspace.")), calls(call("list_dir", path=".")), answer, "Done."]


async def test_delegate_usage_is_journaled_with_the_sub_session_id(make_agent):
    agent = make_agent(delegate_script())
    await agent.turn("Delegate it.")
    (sub_id,) = agent.sub_sessions
    sub_usage = [u for u in agent.session.usage if u.sub_session == sub_id]
    assert len(sub_usage) == 2
    await agent.aclose()
    replayed, _ = SessionDir(agent.session_dir.path).replay()
    assert [u.sub_session for u in replayed.usage].count(sub_id) == 2


async def test_delegate_sub_session_is_archived_in_the_session_dir(make_agent):
    agent = make_agent(delegate_script())
    await agent.turn("Delegate it.")
    (sub_id,) = agent.sub_sessions
    archived = [p for p in agent.session_dir.path.rglob("*") if sub_id in p.name]
    assert archived, f"nothing named {sub_id} under {agent.session_dir.path}"


async def test_delegate_failure_is_a_tool_error_in_the_parent(make_agent):
    agent = make_agent([calls(call("delegate", task="Count the files.")), {"fault": "server_error"}, "Could not."])
    result = await agent.turn("Delegate it.")
    assert result.error is None and result.reply.content == "Could not."
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:") and "delegate" in answer.content


async def test_a_turn_stops_after_max_steps_of_tool_calls(make_agent):
    from tailrent_tui.agent.loop import MAX_STEPS

    agent = make_agent([calls(call("list_dir", path="."))] * (MAX_STEPS + 5))
    result = await agent.turn("Keep listing.")
    assert result.error is None
    assert any(f"{MAX_STEPS}" in n for n in result.notices)
    assert len(agent.model.requests) == MAX_STEPS
    assert agent.model.remaining == 5


# -- rung 4: remember / recall, search_history after a fold -----------------------------------


async def test_remember_leaves_a_one_line_pointer_and_recall_reads_it_back(make_agent):
    schema = "\n".join(f"table t{i} (id int primary key, payload jsonb, created_at timestamptz)" for i in range(40))
    agent = make_agent([calls(call("remember", key="schema", text=schema)), calls(call("recall", key="schema")), "ok"])
    result = await agent.turn("Keep the schema aside, then read it back.")
    assert result.error is None

    pointer, recalled = tool_messages(agent)
    assert pointer.kind == Kind.memory_pointer
    assert "\n" not in pointer.content.strip() and "schema" in pointer.content
    assert pointer.tokens < agent.session.count(schema) // 10
    stored = json.loads((agent.session_dir.path / "memory" / "schema.json").read_text())
    assert stored["text"] == schema
    assert recalled.content == schema
    assert "t39" not in wire_tool_messages(agent.model.requests[1])[0]["content"]


async def test_recall_of_an_unknown_key_is_a_tool_error(make_agent):
    agent = make_agent([calls(call("recall", key="nothing-here")), "ok"])
    result = await agent.turn("Recall it.")
    assert result.error is None and result.reply.content == "ok"
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:") and "nothing-here" in answer.content


async def test_remember_with_a_bad_key_is_a_tool_error(make_agent):
    agent = make_agent([calls(call("remember", key="../escape", text="x")), "ok"])
    result = await agent.turn("Store it.")
    assert result.error is None
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:")
    assert not (agent.session_dir.path / "escape.json").exists()


async def test_search_history_finds_a_fact_a_fold_removed(make_agent):
    fact = "the refresh token TTL is 900 seconds per ticket AUTH-4471"
    opening = "hello again, here is some background on the login flow before we start: " + fact + "."
    agent = make_agent(["Noted."], fold={"guard": "off", "summarizer": "lossy"})
    agent.session.detect_statements = False  # no ledger: the fact must leave the context with the fold
    await agent.turn(opening)
    span = [m.id for m in agent.session.messages]
    folded = await agent.ladder.fold(span)
    assert isinstance(folded, Folded)
    assert "AUTH-4471" not in agent.session.visible_text(), "the fold removed the fact from the context"
    assert (agent.session_dir.path / "archive" / "fold-0001.json").exists()

    agent.model = MockModel([calls(call("search_history", query="AUTH-4471")), "Found it: 900 seconds."])
    result = await agent.turn("What was the ticket for the TTL?")
    assert result.error is None
    (answer,) = tool_messages(agent)
    assert not answer.content.startswith("error:")
    assert "900 seconds" in answer.content and "AUTH-4471" in answer.content
    assert "fold #1" in answer.content


async def test_search_history_finds_spilled_and_remembered_text(make_agent, workspace):
    entries = [f"entry {i}" for i in range(1500)]
    entries[1000] = "needle-7731 in the middle"
    (workspace / "dump.txt").write_text("\n".join(entries) + "\n")
    agent = make_agent(
        [
            calls(call("read_file", path="dump.txt"), call("remember", key="plan", text="step 2 uses needle-7731 too")),
            calls(call("search_history", query="needle-7731")),
            "ok",
        ],
        tools={"spill_threshold": 1000},
    )
    result = await agent.turn("Find the needle.")
    assert result.error is None
    spilled = tool_messages(agent)[0]
    assert spilled.kind == Kind.spill_pointer
    answer = tool_messages(agent)[-1]
    assert answer.kind == Kind.tool_result
    assert spilled.spill_id in answer.content and "needle-7731 in the middle" in answer.content
    assert 'recall("plan")' in answer.content


async def test_search_history_without_a_match_says_so(make_agent):
    agent = make_agent([calls(call("search_history", query="zebra-0000")), "ok"])
    await agent.turn("Search.")
    (answer,) = tool_messages(agent)
    assert not answer.content.startswith("error:") and "zebra-0000" in answer.content


async def test_tools_session_replays_from_the_journal(make_agent, workspace):
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(800)))
    agent = make_agent(
        [calls(call("read_file", path="big.txt"), call("remember", key="k", text="kept aside")), "ok"],
        tools={"spill_threshold": 100},
    )
    await agent.turn("Go.")
    before = [(m.id, m.kind, m.content, m.spill_id, m.tool_call_id) for m in agent.session.messages]
    await agent.aclose()
    replayed, _ = SessionDir(agent.session_dir.path).replay()
    assert [(m.id, m.kind, m.content, m.spill_id, m.tool_call_id) for m in replayed.messages] == before
    assert set(replayed.spills) == set(agent.session.spills)
