"""Hostile cases of the hardening review (issue 13) against approvals, run_shell and grep.

- C2: a session approval ("allow `ls` for the session") covers one simple command
  with that prefix, never a compound one, and destructive commands get no offer.
- Shell output cannot fill the disk: one cap on what is kept, for every path.
- run_shell leaves no process behind, reports its timeout truthfully and hands
  the command no API key.
- Session tools check their arguments; the unknown-tool error lists every tool.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tailrent_tui.agent.loop import ApprovalRequest, TurnCallbacks
from tailrent_tui.agent.tools import ToolCaps, ToolContext, run_tool, run_tool_async
from tailrent_tui.settings import Settings
from tailrent_tui.ui.screens.approval import ApprovalScreen
from tests.support.ui_helpers import make_agent as make_ui_agent
from tests.support.ui_helpers import make_app, wait_until


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def calls(*items: dict) -> dict:
    return {"tool_calls": list(items)}


def tool_messages(agent) -> list:
    return [m for m in agent.session.messages if m.role == "tool"]


class Approver:
    """Answers from a list and records what it was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> str:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else "deny"


# -- C2: a prefix approval matches one simple command -------------------------------------

#: Each would run `touch pwned` (or change what `ls` runs) if `ls` approved for the session covered it.
HOSTILE_AFTER_LS = [
    "ls && touch pwned",
    "ls&&touch pwned",
    "ls; touch pwned",
    "ls;touch pwned",
    "ls || touch pwned",
    "ls | touch pwned",
    "ls|touch pwned",
    "ls & touch pwned",
    "ls$(touch pwned)",
    "ls $(touch pwned)",
    'ls "$(touch pwned)"',
    "ls `touch pwned`",
    "ls\ntouch pwned",
    "ls\r\ntouch pwned",
    "ls > pwned",
    "ls >> pwned",
    "ls 2> pwned",
    "ls &>pwned",
    "ls <(touch pwned)",
    "ls >(touch pwned)",
    "ls ${x:-$(touch pwned)}",
    "ls a#b; touch pwned",
    "ls #x\ntouch pwned",
    "ls && { touch pwned; }",
    "ls; (touch pwned)",
    "ls $'\\x3b' ; touch pwned",
    "ls -- $(touch${IFS}pwned)",
    "ls \\\n; touch pwned",
    "ls 'a' ; touch pwned",
    'ls "a";touch pwned',
    "ls * ; touch pwned",
    "PATH=. ls",
    "LD_PRELOAD=./evil.so ls",
    "ls\t;touch pwned",
]


@pytest.mark.fault("C2 prefix approval")
@pytest.mark.parametrize("hostile", HOSTILE_AFTER_LS)
async def test_an_ls_session_approval_does_not_cover_a_compound_command(make_agent, workspace, hostile):
    agent = make_agent([calls(call("run_shell", command="ls -la")), "listed", calls(call("run_shell", command=hostile)), "done"])
    approver = Approver("prefix", "deny")
    await agent.turn("List.", TurnCallbacks(approve=approver))
    await agent.turn("Again.", TurnCallbacks(approve=approver))
    assert [a.arguments["command"] for a in approver.asked] == ["ls -la", hostile], "asked again"
    assert not (workspace / "pwned").exists()
    assert "denied" in tool_messages(agent)[-1].content


@pytest.mark.fault("C2 prefix approval")
@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "/bin/rm -f notes.md",
        "rmdir old",
        "mv a.txt b.txt",
        "dd if=/dev/zero of=disk.img count=1",
        "chmod -R 777 .",
        "chown -R nobody .",
        "sudo ls",
        "git push --force origin main",
        "git push -f",
        "git reset --hard HEAD~3",
        "git clean -fdx",
        "git checkout -- .",
        "git branch -D feature",
        "find . -name '*.pyc' -delete",
        "find . -exec rm {} +",
        "sed -i s/a/b/ notes.md",
        "shred secret.txt",
        "truncate -s 0 log.txt",
        "xargs rm",
        "bash -c 'echo hi'",
        "env ls",
        "kill -9 99999999",
        "python -c 'print(1)'",
        # they run another command, or their arguments run code or write any file (the review's finds).
        # This test RUNS each command once (the first answer allows it once): every one must be
        # harmless if it runs, inside the workspace.
        "uv run true",
        "npm exec -c true",
        "docker run --rm alpine true",
        "git submodule foreach true",
        "sed -n 1p notes.md",
        "tar --to-command=cat -xf missing.tar",
        "sort -o sorted.txt notes.md",
        "curl -o fetched.txt http://127.0.0.1:9/",
        "git diff --output=diff.txt",
        "coproc true",
    ],
)
async def test_destructive_commands_get_no_session_offer(make_agent, workspace, command):
    agent = make_agent([calls(call("run_shell", command=command)), "asked", calls(call("run_shell", command=command)), "again"])
    approver = Approver("prefix", "deny")
    await agent.turn("Do it.", TurnCallbacks(approve=approver))
    await agent.turn("Do it again.", TurnCallbacks(approve=approver))
    assert approver.asked[0].command_prefix is None, "no session-wide offer for a destructive command"
    assert approver.asked[0].allows and "once" in approver.asked[0].allows
    assert len(approver.asked) == 2, "a 'prefix' answer to a destructive command approves nothing beyond it"


@pytest.mark.fault("C2 prefix approval")
@pytest.mark.parametrize(
    ("approved", "later"),
    [
        ("git status", "git push --force"),
        ("git status", "git reset --hard"),
        ("git status", "git log"),
        ("ls -la", "lsblk"),
        ("ls -la", "./ls"),
        ("python -m pytest -q", "python -c 'import os'"),
        ("python -m pytest -q", "python -m http.server"),
        ("gh repo view me/x", "gh repo delete me/x --yes"),
        ("kubectl get pods", "kubectl delete pods --all"),
    ],
)
async def test_an_approved_prefix_does_not_cover_another_program_or_subcommand(make_agent, approved, later):
    agent = make_agent([calls(call("run_shell", command=approved)), "ok", calls(call("run_shell", command=later)), "ok"])
    approver = Approver("prefix", "deny")
    await agent.turn("One.", TurnCallbacks(approve=approver))
    await agent.turn("Two.", TurnCallbacks(approve=approver))
    assert [a.arguments["command"] for a in approver.asked] == [approved, later]


async def test_an_approved_prefix_still_covers_its_simple_commands(make_agent, workspace):
    (workspace / "src").mkdir()
    agent = make_agent(
        [
            calls(call("run_shell", command="ls -la")),
            "ok",
            calls(call("run_shell", command="ls src")),
            calls(call("run_shell", command="ls 'a file;with semicolon'")),
            "ok",
        ]
    )
    approver = Approver("prefix")
    await agent.turn("One.", TurnCallbacks(approve=approver))
    await agent.turn("Two.", TurnCallbacks(approve=approver))
    assert len(approver.asked) == 1
    assert approver.asked[0].command_prefix == "`ls` (read-only)"


@pytest.fixture
def ui_config(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


def _button_labels(screen) -> dict[str, str]:
    from textual.widgets import Button

    return {b.id: str(b.label) for b in screen.query(Button)}


def _screen_text(screen) -> str:
    from textual.widgets import Static

    return "\n".join(str(s.render()) for s in screen.query(Static))


@pytest.mark.fault("C2 prefix approval")
async def test_the_dialog_shows_what_a_session_approval_allows_and_asks_again_for_a_compound(tmp_path, ui_config):
    script = [
        {"tool_calls": [call("run_shell", command="ls -la")]},
        {"tool_calls": [call("run_shell", command="ls && touch pwned")]},
        {"text": "done"},
    ]
    agent = make_ui_agent(tmp_path, script=script)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"go", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        labels = _button_labels(app.screen)
        assert "ls" in labels["prefix"] and "&&" not in labels["prefix"]
        text = _screen_text(app.screen)
        assert "`ls`" in text and "one simple command" in text
        await pilot.click("#prefix")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, ApprovalScreen) and "touch" in json.dumps(app.screen.arguments),
            rounds=2000,
            what="asked again for the compound command",
        )
        assert "&&" in _screen_text(app.screen)
        await pilot.press("d")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")
    assert not (tmp_path / "pwned").exists()


@pytest.mark.fault("C2 prefix approval")
async def test_the_dialog_offers_no_session_approval_for_rm(tmp_path, ui_config):
    (tmp_path / "build").mkdir()
    script = [{"tool_calls": [call("run_shell", command="rm -rf build")]}, {"text": "done"}]
    agent = make_ui_agent(tmp_path, script=script)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"go", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        assert "prefix" not in _button_labels(app.screen)
        assert "destructive" in _screen_text(app.screen)
        await pilot.press("p")  # no session approval to give: the dialog stays
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("d")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")
    assert (tmp_path / "build").exists()


# -- the tool command ------------------------------------------------------------------------


def _tool_cli(tmp_path: Path, ws: Path, name: str, args: dict, *, timeout: float = 60, **env_vars: str):
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    env = {**os.environ, "TAILRENT_CONFIG_DIR": str(config), "TAILRENT_HOME": str(tmp_path / "data"), **env_vars}
    return subprocess.run(
        [sys.executable, "-m", "tailrent_tui", "tool", name, json.dumps(args), "--workspace", str(ws), "--json"],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=timeout,
    )


# -- shell output cap -------------------------------------------------------------------------

FIVE_MB = "head -c 5000000 /dev/zero | tr '\\0' y"


@pytest.mark.fault("shell output cap")
async def test_a_raw_spill_is_capped_and_the_rest_counted(make_agent):
    agent = make_agent(
        [calls(call("run_shell", command=FIVE_MB)), "ok"],
        yolo=True,
        caps=ToolCaps(shell_max_bytes=1000, shell_spill_max_bytes=100_000),
    )
    await agent.turn("Print a lot.", None)
    (pointer,) = tool_messages(agent)
    raw = agent.spill_store.raw_path_for(pointer.spill_id)
    assert raw.stat().st_size == 100_000
    assert "4.7 MB more not kept (4,900,000 bytes)" in pointer.content


@pytest.mark.fault("shell output cap")
async def test_a_sessions_raw_spills_are_capped_in_total(make_agent):
    sixty_kb = "head -c 60000 /dev/zero | tr '\\0' y"
    agent = make_agent(
        [
            calls(call("run_shell", command=sixty_kb)),
            calls(call("run_shell", command=sixty_kb)),
            calls(call("run_shell", command=sixty_kb)),
            "ok",
        ],
        yolo=True,
        caps=ToolCaps(shell_max_bytes=1000, shell_spill_max_bytes=100_000, spills_session_max_bytes=100_000),
    )
    await agent.turn("Print thrice.", None)
    first, second, third = tool_messages(agent)
    sizes = [
        agent.spill_store.raw_path_for(m.spill_id).stat().st_size if m.spill_id and m.content.count("[spill") else 0
        for m in (first, second)
    ]
    assert sizes[0] == 60_000 and sizes[1] == 40_000
    assert "not kept" in second.content and "session" in second.content
    assert "not kept" in third.content and "session" in third.content
    total = sum(p.stat().st_size for p in agent.spill_store.directory.glob("*.raw"))
    assert total <= 100_000


@pytest.mark.fault("shell output cap")
@pytest.mark.parametrize("sink", [False, True], ids=["tool path", "agent path"])
def test_both_paths_keep_the_cap_and_count_the_rest(tmp_path, sink):
    ws = tmp_path / "ws"
    ws.mkdir()
    spills: list[Path] = []

    def open_sink():
        path = tmp_path / f"spill-{len(spills)}.raw"
        spills.append(path)
        return path.open("wb"), path.name

    ctx = ToolContext(
        root=ws,
        caps=ToolCaps(shell_max_bytes=1000, shell_spill_max_bytes=2000),
        spill_sink=open_sink if sink else None,
    )
    result = run_tool("run_shell", {"command": FIVE_MB, "timeout": 60}, ctx)
    assert result.meta["bytes"] == 5_000_000
    assert result.meta["exit_code"] == 0, "the cap cuts what is kept, not the command"
    kept = 2000 if sink else 1000
    assert result.meta["not_kept"] == 5_000_000 - kept
    assert f"more not kept ({5_000_000 - kept:,} bytes)" in result.content
    if sink:
        assert spills[0].stat().st_size == 2000


@pytest.mark.fault("shell output cap")
async def test_a_runaway_writer_is_killed_once_its_dropped_output_passes_the_cap(make_agent):
    agent = make_agent(
        [calls(call("run_shell", command="yes", timeout=60)), "ok"],
        yolo=True,
        caps=ToolCaps(shell_max_bytes=1000, shell_spill_max_bytes=50_000, shell_discard_max_bytes=2_000_000),
    )
    await agent.turn("Say yes.", None)
    (pointer,) = tool_messages(agent)
    assert agent.spill_store.raw_path_for(pointer.spill_id).stat().st_size == 50_000
    assert "more not kept (at least)" in pointer.content and "killed" in pointer.content
    assert "timed out" not in pointer.content


@pytest.mark.fault("shell output cap")
def test_the_tool_command_cuts_with_the_same_line(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    # the command's caps are the session's fixed ones: 10 MB kept in memory (not spilled: rung 1 alone)
    done = _tool_cli(
        tmp_path,
        ws,
        "run_shell",
        {"command": "head -c 12000000 /dev/zero | tr '\\0' y"},
        TAILRENT_TOOLS_SPILL_THRESHOLD="100000000",
    )
    out = json.loads(done.stdout)
    assert "output cut at 10 MB" in out["content"] and "1.4 MB more not kept (1,514,240 bytes)" in out["content"]


# -- run_shell: background processes, truthful timeouts, no keys -----------------------------


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _pids_written(ws: Path, *names: str) -> list[int]:
    """The pids a running command wrote to `names` in the workspace (waits for them)."""
    paths = [ws / name for name in names]
    for _ in range(400):
        if all(p.exists() and p.read_text().endswith("\n") for p in paths):
            break
        await asyncio.sleep(0.05)
    return [int(p.read_text()) for p in paths]


async def _all_gone(pids: list[int]) -> bool:
    """Wait up to 5 s for `pids` to be gone; kill what is left and say whether any was."""
    for _ in range(100):
        if all(_gone(pid) for pid in pids):
            break
        await asyncio.sleep(0.05)
    alive = [pid for pid in pids if not _gone(pid)]
    for pid in alive:
        os.kill(pid, 9)
    return not alive


@pytest.mark.fault("run_shell background and keys")
def test_background_processes_do_not_outlive_the_call(tmp_path):
    result = run_tool("run_shell", {"command": "sleep 60 & echo $!"}, ToolContext(root=tmp_path))
    pid = int(result.content.split()[0])
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert _gone(pid), "the background sleep outlived run_shell"
    finally:
        if not _gone(pid):
            os.kill(pid, 9)
    assert "background" in result.content


@pytest.mark.fault("run_shell background and keys")
def test_a_background_writer_does_not_hold_the_call_to_its_timeout(tmp_path):
    command = "(while true; do echo tick; sleep 0.05; done) & echo started"
    result = run_tool("run_shell", {"command": command, "timeout": 20}, ToolContext(root=tmp_path))
    assert result.meta["timed_out"] is False
    assert result.meta["seconds"] < 15, "returned when the shell exited, not at the timeout"
    assert "started" in result.content and "background" in result.content


@pytest.mark.fault("run_shell background and keys")
def test_a_timeout_is_reported_truthfully(tmp_path):
    result = run_tool("run_shell", {"command": "sleep 30", "timeout": 0.5}, ToolContext(root=tmp_path))
    assert result.meta["timed_out"] is True and result.is_error


@pytest.mark.fault("run_shell background and keys")
@pytest.mark.parametrize("var", ["TAILRENT_API_KEY", "OPENAI_API_KEY"])
def test_the_command_gets_no_api_key(tmp_path, monkeypatch, var):
    monkeypatch.setenv(var, "sk-very-secret-123")
    result = run_tool("run_shell", {"command": "env"}, ToolContext(root=tmp_path))
    assert "sk-very-secret-123" not in result.content and f"{var}=" not in result.content
    assert "PATH=" in result.content


@pytest.mark.fault("run_shell background and keys")
async def test_a_cancelled_call_kills_its_process_group(tmp_path):
    command = "sleep 60 & echo $! > bg.pid; echo $$ > shell.pid; sleep 60"
    task = asyncio.create_task(run_tool_async("run_shell", {"command": command, "timeout": 20}, ToolContext(root=tmp_path)))
    pids = await _pids_written(tmp_path, "shell.pid", "bg.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _all_gone(pids), "the cancelled call left its processes running"


@pytest.mark.fault("run_shell background and keys")
async def test_escape_during_a_shell_call_kills_its_process_group(make_agent, workspace):
    agent = make_agent(
        [calls(call("run_shell", command="sleep 60 & echo $! > bg.pid; echo $$ > shell.pid; sleep 60")), "ok"],
        yolo=True,
    )
    task = asyncio.create_task(agent.turn("Wait.", None))
    pids = await _pids_written(workspace, "shell.pid", "bg.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _all_gone(pids), "the cancelled call left its processes running"


#: Harmless if it ever ran to its end: it writes one file in the workspace, after half a minute.
SLOW_THEN_MARK = "echo $$ > shell.pid; sleep 30; echo done > marker"


def _group_alive(pgid: int) -> list[int]:
    """The processes of group `pgid` still running (zombies do not count)."""
    alive = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return alive


async def _group_gone_within(pgid: int, seconds: float) -> list[int]:
    """Wait up to `seconds` for group `pgid` to be gone; kill and return what is left."""
    deadline = time.monotonic() + seconds
    while (alive := _group_alive(pgid)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    for pid in alive:
        os.kill(pid, 9)
    return alive


@pytest.mark.fault("run_shell background and keys")
async def test_escape_kills_a_long_command_at_once(make_agent, workspace):
    agent = make_agent([calls(call("run_shell", command=SLOW_THEN_MARK, timeout=60)), "ok"], yolo=True)
    task = asyncio.create_task(agent.turn("Wait.", None))
    (pgid,) = await _pids_written(workspace, "shell.pid")
    assert _group_alive(pgid), "the command runs, in its own process group"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # "at once" against the command's 60 s: a loaded machine (2 shared cores) can take a second to reap it
    assert not await _group_gone_within(pgid, 3.0), "the process group outlived the cancel by three seconds"
    assert not (workspace / "marker").exists()
    assert not tool_messages(agent), "a cancelled call has no outcome"


@pytest.mark.fault("run_shell background and keys")
async def test_quitting_does_not_wait_for_a_running_command(tmp_path, ui_config):
    script = [{"tool_calls": [call("run_shell", command=SLOW_THEN_MARK, timeout=60)]}, {"text": "done"}]
    settings = Settings(yolo=True, tools={"spill_threshold": 200}, tokenizer="chars4")
    agent = make_ui_agent(tmp_path, script=script, settings=settings)
    app = make_app(agent)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"go", "enter")
        (pgid,) = await _pids_written(tmp_path, "shell.pid")
        assert _group_alive(pgid)
        quit_at = time.monotonic()
        await pilot.press("ctrl+q")
    assert time.monotonic() - quit_at < 5, "quitting waited for the command"
    assert not await _group_gone_within(pgid, 1.0), "the command outlived the app"
    assert not (tmp_path / "marker").exists()


# -- tool argument types --------------------------------------------------------------------


@pytest.mark.fault("tool argument types")
@pytest.mark.parametrize(
    ("name", "arguments", "words"),
    [
        ("read_spill", {"id": 123}, "'id' of read_spill must be string"),
        ("read_spill", {"id": "x", "start": "10"}, "'start' of read_spill must be integer"),
        ("remember", {"key": "k", "text": ["a", "b"]}, "'text' of remember must be string"),
        ("remember", {"key": 5, "text": "t"}, "'key' of remember must be string"),
        ("recall", {"key": {"a": 1}}, "'key' of recall must be string"),
        ("search_history", {"query": 7}, "'query' of search_history must be string"),
        ("delegate", {"task": {"do": "x"}}, "'task' of delegate must be string"),
        ("remember", {"key": "k"}, "missing required argument(s) text"),
        ("recall", {"key": "k", "extra": 1}, "recall has no argument 'extra'"),
    ],
)
async def test_session_tools_check_their_argument_types(make_agent, name, arguments, words):
    agent = make_agent([calls(call(name, **arguments)), "ok"])
    await agent.turn("Call it.", TurnCallbacks())
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error:") and words in answer.content, answer.content
    assert "\n" not in answer.content


@pytest.mark.fault("tool argument types")
async def test_the_unknown_tool_error_lists_every_tool(make_agent):
    agent = make_agent([calls(call("rm_everything")), "ok"])
    await agent.turn("Call it.", TurnCallbacks())
    (answer,) = tool_messages(agent)
    assert answer.content.startswith("error: unknown tool 'rm_everything'")
    for name in [t["name"] for t in agent.tools.offered_tools()]:
        assert name in answer.content
    assert "read_spill" in answer.content and "delegate" in answer.content
