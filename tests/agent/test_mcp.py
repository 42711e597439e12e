"""MCP tool servers against real servers written with the SDK's server side (tests/support/mcp_servers/).

Each server is a real subprocess on stdio, or on streamable HTTP at 127.0.0.1
on an ephemeral port. The agents are built as the app builds them (real
session directory, journal, spill files); the mock model calls the tools.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tailrent_tui.agent.loop import TurnCallbacks
from tailrent_tui.agent.mcp import hub_for
from tailrent_tui.agent.tools import TOOLS, ToolContext, ToolSpec, register, run_tool_async, unregister
from tailrent_tui.core.messages import Kind
from tailrent_tui.models.mock import MockModel
from tailrent_tui.settings import Settings, SettingsError, load_settings
from tests.agent.test_tools_ladder import Approver

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "tools_server.py"


def stdio(*modes: str, **extra: Any) -> dict[str, Any]:
    args = [str(SERVER)]
    for mode in modes:
        args += ["--mode", mode]
    return {"command": sys.executable, "args": args, **extra}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def until(condition: Any, what: str, seconds: float = 20.0) -> None:
    """Poll the loop until `condition()` holds (servers start in real time); fail after `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.02)


def mcp_names() -> list[str]:
    return [name for name in TOOLS if "__" in name]


@pytest.fixture(autouse=True)
def no_tools_left_behind():
    yield
    leftover = mcp_names()
    for name in leftover:
        unregister(name)
    assert not leftover, f"MCP tools left in the registry: {leftover}"


# -- a session's calls ------------------------------------------------------------------------


async def test_mcp_tools_run_through_the_agents_door(make_agent, tmp_path: Path) -> None:
    """Listing, approval per tool (once, then for the session), a huge result spilled and read back,
    an image saved as a raw spill, an invalid argument refused by the registry's check, the journal."""
    agent = make_agent(mcp={"servers": {"fx": stdio()}}, tools={"spill_threshold": 500}, tokenizer="chars4")
    base = agent.session.tool_schema_tokens
    hub = agent.mcp
    await hub.start()
    await hub.wait_ready()
    assert hub.links["fx"].state == "ready"
    assert {"fx__echo", "fx__big", "fx__image"} <= set(mcp_names())
    # the schema as the server gave it, offered on the wire, and counted apart in the head
    offered = {t["name"]: t for t in agent.tools.offered_tools()}
    assert offered["fx__echo"]["parameters"]["properties"]["text"]["type"] == "string"
    assert hub.schema_tokens()["fx"] > 0
    assert agent.session.tool_schema_tokens == base + hub.schema_tokens()["fx"]

    agent.model = MockModel(
        [
            call("fx__echo", text="first"),
            call("fx__echo", text="second"),
            call("fx__echo", txt="misspelled"),
            call("fx__big", kb=64),
            call("fx__image"),
            {"text": "done"},
        ]
    )
    approver = Approver("once", "prefix", "prefix", "prefix")
    result = await agent.turn("Use the server.", TurnCallbacks(approve=approver))
    assert result.error is None
    # every MCP tool asks by default; "for the session" covers that tool only
    assert [r.tool for r in approver.asked] == ["fx__echo", "fx__echo", "fx__big", "fx__image"]
    results = [m for m in agent.session.messages if m.role == "tool"]
    assert [m.content for m in results[:2]] == ["first", "second"]
    assert "has no argument 'txt'" in results[2].content
    big = results[3]
    assert big.kind == Kind.spill_pointer and big.tool == "fx__big"
    assert "line 000000 of the big result" in agent.spill_store.read_spill(big.spill_id)
    image = results[4].content
    assert "image/png" in image and "a chart" in image
    raw_id = image.split("raw spill ")[1].split("]")[0]
    assert agent.spill_store.raw_path_for(raw_id).read_bytes().startswith(b"\x89PNG")
    journal = (agent.session_dir.path / "journal.jsonl").read_text()
    assert '"fx__big"' in journal and '"fx__echo"' in journal

    await hub.aclose()
    assert mcp_names() == []
    assert agent.session.tool_schema_tokens == base


async def test_a_slow_call_is_cancelled_by_escape_and_one_past_its_timeout_is_abandoned() -> None:
    hub = hub_for(Settings(mcp={"servers": {"fx": stdio(timeout=0.5)}}), {}, Path.cwd())
    try:
        await hub.start()
        await hub.wait_ready()
        ctx = ToolContext(root=Path.cwd())
        task = asyncio.create_task(run_tool_async("fx__slow", {"seconds": 30}, ctx))
        await asyncio.sleep(0.1)
        task.cancel()  # what escape does to the turn's task
        with pytest.raises(asyncio.CancelledError):
            await task
        timed_out = await run_tool_async("fx__slow", {"seconds": 5}, ctx)
        assert timed_out.is_error
        assert "did not answer within 0.5 s (mcp.servers.fx.timeout)" in timed_out.content
        # the server outlived both
        assert (await run_tool_async("fx__echo", {"text": "still here"}, ctx)).content == "still here"
    finally:
        await hub.aclose()


async def test_a_server_that_crashes_mid_call_is_restarted_once_then_left_failed() -> None:
    notes: list[str] = []
    hub = hub_for(Settings(mcp={"servers": {"fx": stdio()}}), {}, Path.cwd())
    hub.note = lambda text, level: notes.append(text)
    ctx = ToolContext(root=Path.cwd())
    try:
        await hub.start()
        await hub.wait_ready()
        first_pid = hub.links["fx"].wire.pid
        crashed = await run_tool_async("fx__crash", {}, ctx)
        assert crashed.is_error and "went away during the call" in crashed.content
        await until(lambda: hub.links["fx"].state == "ready" and hub.links["fx"].wire.pid != first_pid, "the restart")
        assert (await run_tool_async("fx__echo", {"text": "back"}, ctx)).content == "back"
        again = await run_tool_async("fx__crash", {}, ctx)
        assert again.is_error
        await until(lambda: hub.links["fx"].state == "failed", "the second loss")
        assert mcp_names() == []  # its tools left the registry
        assert any("starting it again (once)" in n for n in notes)
        assert any(n.startswith("mcp: fx failed:") and "the session goes on without it" in n for n in notes)
        assert all("Traceback" not in n for n in notes)
    finally:
        await hub.aclose()


async def test_a_1_gb_result_is_dropped_unread_and_the_server_keeps_serving() -> None:
    hub = hub_for(Settings(mcp={"servers": {"fx": stdio("huge_line")}}), {}, Path.cwd())
    ctx = ToolContext(root=Path.cwd())
    try:
        await hub.start()
        await hub.wait_ready()
        huge = await run_tool_async("fx__big", {"kb": 1024 * 1024}, ctx)
        assert huge.is_error
        assert "a message of 1 GB, over mcp.max_message_bytes (64 MB): it was dropped unread" in huge.content
        assert (await run_tool_async("fx__echo", {"text": "fine"}, ctx)).content == "fine"
    finally:
        await hub.aclose()


async def test_rung_1_caps_text_and_structured_content_alike() -> None:
    settings = Settings(mcp={"servers": {"fx": stdio()}, "max_result_bytes": 4096})
    hub = hub_for(settings, {}, Path.cwd())
    ctx = ToolContext(root=Path.cwd())
    try:
        await hub.start()
        await hub.wait_ready()
        out = await run_tool_async("fx__big", {"kb": 64}, ctx)
        assert out.content.startswith("line 000000 of the big result\n")
        assert out.cut is not None and "showing the first 4 KB of 60 KB (mcp.max_result_bytes)" in out.cut
        assert len(out.content.encode()) == 4096 + 1 + len(out.cut.encode())
        structured = await run_tool_async("fx__rows", {"n": 2000}, ctx)
        assert structured.content.startswith('{\n "rows": [\n  {\n   "id": 0,')
        assert structured.cut is not None and "showing the first 4 KB of" in structured.cut
        small = await run_tool_async("fx__rows", {"n": 1}, ctx)
        assert json.loads(small.content) == {"rows": [{"id": 0, "name": "row 0"}]}
        resource = await run_tool_async("fx__resource", {}, ctx)
        assert resource.content == "[resource file:///notes.txt]\nthe notes"
    finally:
        await hub.aclose()


# -- bad servers, bad config --------------------------------------------------------------------


async def test_bad_servers_are_one_line_each_and_the_good_tools_still_work(tmp_path: Path) -> None:
    """A missing command, a server that never answers initialize, one that prints garbage to stdout
    and offers an invalid schema, one whose every call errors, and a name taken by a built-in."""
    register(ToolSpec(name="docs__echo", description="a built-in", parameters={"type": "object"}), lambda a, c: None)
    settings = Settings(
        mcp={
            "servers": {
                "gone": {"command": "no-such-mcp-server-here"},
                "mute": stdio("hang", startup_timeout=2),
                "noisy": stdio("garbage", "bad_schema"),
                "grumpy": stdio("errors"),
                "docs": stdio(),
            }
        }
    )
    hub = hub_for(settings, {"mcp": "config.toml"}, tmp_path)
    notes: list[str] = []
    hub.note = lambda text, level: notes.append(text)
    ctx = ToolContext(root=tmp_path)
    try:
        await hub.start()
        await hub.wait_ready()
        states = {name: link.state for name, link in hub.links.items()}
        assert states == {"gone": "failed", "mute": "failed", "noisy": "ready", "grumpy": "ready", "docs": "ready"}
        lines = "\n".join(hub.lines())
        assert "gone  failed: command 'no-such-mcp-server-here' not found" in lines
        assert "mute  failed: did not answer initialize and tools/list within 2 s (mcp.servers.mute.startup_timeout)" in lines
        assert "[2 non-JSON-RPC line(s) on stdout ignored]" in lines
        assert "tool 'broken' left out: its input schema is not valid JSON Schema" in lines
        assert "tool 'echo' refused: docs__echo is the name of a built-in tool; rename the server" in lines
        assert TOOLS["docs__echo"].spec.description == "a built-in"
        assert "noisy__broken" not in TOOLS
        assert (await run_tool_async("noisy__echo", {"text": "heard"}, ctx)).content == "heard"
        grumpy = await run_tool_async("grumpy__echo", {"text": "please"}, ctx)
        assert grumpy.is_error and "refused: please" in grumpy.content
        assert all("\n" not in n and "Traceback" not in n for n in notes)
    finally:
        await hub.aclose()
        unregister("docs__echo")


async def test_secrets_in_a_servers_stderr_are_not_journaled(make_agent, monkeypatch) -> None:
    monkeypatch.setenv("MY_SECRET", "sk-live-0123456789abcdef")
    agent = make_agent(
        mcp={
            "servers": {
                "leaky": stdio("secret", "hang", env={"SECRET_TOKEN": "${MY_SECRET}"}, startup_timeout=3),
            }
        }
    )
    await agent.mcp.start()
    await agent.mcp.wait_ready()
    (line,) = [n.text for n in agent.session.notes if n.text.startswith("mcp: leaky")]
    assert "its last words on stderr: starting with token ***" in line
    journal = (agent.session_dir.path / "journal.jsonl").read_text()
    assert "starting with token ***" in journal
    assert "sk-live-0123456789abcdef" not in journal
    await agent.mcp.aclose()


def test_config_errors_are_one_line_naming_the_key(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path))
    cfg = tmp_path / "config.toml"
    cfg.write_text('[mcp.servers.api]\nurl = "https://example.invalid/mcp"\nheaders = {Authorization = "Bearer abc123"}\n')
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith(f"{cfg}: mcp.servers.api.headers:")
    assert "header 'Authorization' is written in clear" in message and "${VAR}" in message
    cfg.write_text('[mcp.servers.both]\ncommand = "x"\nurl = "http://127.0.0.1:1/mcp"\n')
    with pytest.raises(SettingsError, match=r"give either command \(stdio\) or url"):
        load_settings()
    cfg.write_text('[mcp.servers."a__b"]\ncommand = "x"\n')
    with pytest.raises(SettingsError, match="not __"):
        load_settings()
    cfg.write_text('[mcp.servers.api]\nurl = "https://example.invalid/mcp"\nheaders = {Authorization = "Bearer ${TOKEN}"}\n')
    settings, sources, _ = load_settings()
    assert settings.mcp.servers["api"].transport == "http"
    assert sources["mcp.servers"] == str(cfg)


async def test_the_workspaces_mcp_json_is_read_only_when_opted_in(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "proj": {"command": sys.executable, "args": [str(SERVER)]},
                    "mine": {"command": "ignored-because-config-toml-has-it"},
                    "odd": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                }
            }
        )
    )
    mine = {"mine": stdio()}
    assert set(hub_for(Settings(mcp={"servers": mine}), {"mcp": "config.toml"}, tmp_path).links) == {"mine"}
    hub = hub_for(Settings(mcp={"servers": mine, "project_file": True}), {"mcp": "config.toml"}, tmp_path)
    assert hub.origins == {"mine": "config.toml", "proj": str(tmp_path / ".mcp.json"), "odd": str(tmp_path / ".mcp.json")}
    assert "tailrent takes stdio and http" in hub.problems["odd"]
    assert hub.links["mine"].config.command == sys.executable


async def test_a_missing_variable_fails_that_server_in_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    hub = hub_for(Settings(mcp={"servers": {"fx": stdio(env={"KEY": "${NOT_SET_ANYWHERE}"})}}), {}, tmp_path)
    await hub.start()
    await hub.wait_ready()
    assert hub.failures() == ["fx: env KEY needs $NOT_SET_ANYWHERE, which is not set in tailrent's environment"]
    await hub.aclose()


# -- streamable HTTP ----------------------------------------------------------------------------


@pytest.fixture
def http_server():
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


async def test_http_server_headers_from_the_environment_and_a_redirect_elsewhere_refused(
    http_server: str, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FIXTURE_TOKEN", "tok-987654321")
    settings = Settings(
        mcp={
            "max_message_bytes": 65536,
            "servers": {
                "web": {"url": f"{http_server}/mcp", "headers": {"Authorization": "Bearer ${FIXTURE_TOKEN}"}},
                "moved": {"url": f"{http_server}/moved"},
            },
        }
    )
    hub = hub_for(settings, {}, tmp_path)
    try:
        await hub.start()
        await hub.wait_ready()
        assert hub.links["web"].state == "ready"
        ctx = ToolContext(root=tmp_path)
        assert (await run_tool_async("web__auth_header", {}, ctx)).content == "Bearer tok-987654321"
        assert (await run_tool_async("web__echo", {"text": "over http"}, ctx)).content == "over http"
        # an answer over the bound is not read whole; the link connects again, once
        big = await run_tool_async("web__big", {"kb": 200}, ctx)
        assert big.is_error and "passed mcp.max_message_bytes, 64 KB" in big.content
        await until(lambda: hub.links["web"].state == "ready", "the reconnection")
        assert (await run_tool_async("web__echo", {"text": "again"}, ctx)).content == "again"
        moved = hub.links["moved"]
        assert moved.state == "failed"
        assert moved.problem is not None and moved.problem.startswith("refused: ")
        assert "127.0.0.2" in moved.problem
        assert "moved__echo" not in TOOLS
    finally:
        await hub.aclose()


# -- the command line -----------------------------------------------------------------------------


def test_mcp_list_shows_each_server_its_state_and_tools(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "config.toml").write_text(
        f"[mcp.servers.fx]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}]\n"
        '[mcp.servers.gone]\ncommand = "no-such-mcp-server-here"\n'
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TAILRENT_CONFIG_DIR": str(cfg)}
    tailrent = Path(sys.executable).parent / "tailrent"
    out = subprocess.run([str(tailrent), "mcp", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("fx  ready  stdio  9 tool(s), ~") and lines[0].endswith(f"({cfg / 'config.toml'})")
    assert "    fx__echo  Echo the text back." in lines
    assert any(line.startswith("gone  failed: command 'no-such-mcp-server-here' not found") for line in lines)
    data = json.loads(
        subprocess.run([str(tailrent), "mcp", "list", "--json"], env=env, capture_output=True, text=True, timeout=60).stdout
    )
    assert [s["state"] for s in data["servers"]] == ["ready", "failed"]
    # `tailrent tool` starts the one server its tool needs, runs the call through the same door, stops it
    echoed = subprocess.run(
        [str(tailrent), "tool", "fx__echo", '{"text": "one call"}'], env=env, capture_output=True, text=True, timeout=60
    )
    assert (echoed.returncode, echoed.stdout) == (0, "one call\n")
    gone = subprocess.run([str(tailrent), "tool", "gone__x", "{}"], env=env, capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1
    assert gone.stdout.startswith("error: mcp: gone: command 'no-such-mcp-server-here' not found")


async def test_a_turn_sent_while_a_server_starts_waits_for_its_tools(make_agent) -> None:
    """The first frame never waits; the first request does, so the model is offered the tools."""
    agent = make_agent(mcp={"servers": {"fx": stdio(trust=True)}})
    agent.model = MockModel([call("fx__echo", text="in time"), {"text": "done"}])
    notices: list[str] = []
    await agent.mcp.start()  # as the app does after its first frame: nothing waits for it
    assert agent.mcp.links["fx"].state == "starting"
    try:
        result = await agent.turn("Now.", TurnCallbacks(on_notice=lambda text, level: notices.append(text)))
        assert result.error is None
        assert notices[0] == "waiting for MCP server(s) fx to start before the request"
        (tool,) = [m for m in agent.session.messages if m.role == "tool"]
        assert tool.content == "in time"
    finally:
        await agent.mcp.aclose()
