"""Session approvals an attacker cannot stretch (issue 27, item 1).

"Allow for the session" is offered for a read-only allowlist (programs, git
subcommands and their flags, paths inside the workspace) or for one exact command
line; test runners, build tools, interpreters and anything that takes a config, a
script or an output path are allowed once only. Each pair below is a command the
user allows "for the session", then one the review ran without being asked.

Every command here is safe to run: each test RUNS the first command of its pair
(the user's answer allows it), and the second would run only if the approval
stretched. They write, at worst, inside this test's tmp dir (the workspace and its
sibling `outside/`), and `pwned` files are what the assertions look for.
"""

from __future__ import annotations

import subprocess

import pytest

from tailrent_tui.agent.approval import offer_covers, shell_offer
from tailrent_tui.agent.loop import TurnCallbacks
from tailrent_tui.ui.screens.approval import ApprovalScreen
from tests.agent.test_tools_shell_faults import Approver, call, calls, tool_messages
from tests.support.ui_helpers import make_agent as make_ui_agent
from tests.support.ui_helpers import make_app, wait_until

STRETCHED = [
    ("pytest -q test_t.py", "pytest -q test_t.py --basetemp=../outside/dir"),
    ("git grep make", "git grep -O'touch pwned' make"),
    ("make test", "make test --eval=x"),
    ("make test", "make test -f ../outside/evil.mk"),
    ("sqlite3 data.db .tables", "sqlite3 data.db '.shell touch pwned'"),
    ("git config user.name", "git config core.fsmonitor 'touch pwned'"),
    ("sort -u notes.md", "sort -uo ../outside/sorted notes.md"),
    ("curl -sS http://127.0.0.1:9/", "curl -sSo ../outside/x http://127.0.0.1:9/"),
    ("find . -name notes.md", "find . -fprint0 ../outside/list"),
    ("git archive HEAD", "git archive -o ../outside/a.tar HEAD"),
    ("git worktree list", "git worktree add ../outside/wt"),
    ("touch a.txt", "touch ../outside/b.txt"),
    ("gzip -t notes.md", "gzip -k ../outside/notes"),
    ("unzip -l a.zip", "unzip -d ../outside a.zip"),
    ("ls", "ls ../outside"),
    ("ls -la", "ls -la /"),
    ("cat notes.md", "cat /proc/self/environ"),
    ("cat notes.md", "cat link-out"),
    ("rg make", "rg --pre ./pwn.sh make"),
    ("git log", "git log --output=../outside/log"),
    ("git diff", "git diff --ext-diff"),
    ("git status", "git -c core.fsmonitor=./pwn.sh status"),
    ("git branch", "git branch pwned"),
    ("head -n 5 notes.md", "head -n 5 ../outside/notes"),
    ("wc -l notes.md", "wc --files0-from=../outside/list"),
    ("echo hi", "echo ../outside"),
    ("jq . data.json", "jq . ../outside/data.json"),
    ("jq . data.json", "jq -r . data.json"),
    ("python -m pytest -q", "python -m pytest -q -p pwn"),
    ("node tool.js", "node tool.js --out=../outside/x"),
]


def _workspace_for(ws):
    (ws / "notes.md").write_text("make\n")
    outside = ws.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "notes").write_text("secret\n")
    (ws / "link-out").symlink_to(outside / "notes")
    (ws / "pwn.sh").write_text("#!/bin/sh\ntouch pwned\n")
    (ws / "pwn.sh").chmod(0o755)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return outside


@pytest.mark.fault("C1 session approval allowlist")
@pytest.mark.parametrize(("approved", "later"), STRETCHED)
async def test_a_session_approval_does_not_stretch_to_other_arguments(make_agent, workspace, approved, later):
    outside = _workspace_for(workspace)
    agent = make_agent([calls(call("run_shell", command=approved)), "ok", calls(call("run_shell", command=later)), "ok"])
    approver = Approver("prefix", "deny")
    await agent.turn("One.", TurnCallbacks(approve=approver))
    await agent.turn("Two.", TurnCallbacks(approve=approver))
    assert [a.arguments["command"] for a in approver.asked] == [approved, later], "asked again"
    assert "denied" in tool_messages(agent)[-1].content
    assert not (workspace / "pwned").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["notes"], "nothing written outside"


@pytest.mark.fault("C1 session approval allowlist")
@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("pytest -q", "test runner"),
        ("make test", "build tool"),
        ("cargo test", "build tool"),
        ("python run.py", "interpreter"),
        ("npm test", "package manager"),
        ("sqlite3 data.db .tables", "database shell"),
        ("./build.sh", "script"),
        ("tool --config x.toml", "config"),
        ("git commit -m x", "write any file"),
        ("cp a b", "destructive"),
        ("cat ../outside/notes", "outside the workspace"),
        ("ls && touch pwned", "not one simple command"),
    ],
)
def test_the_offer_says_allow_once_and_why(workspace, command, why):
    _workspace_for(workspace)
    offer = shell_offer(command, workspace)
    assert offer.kind is None and offer.shown is None
    assert offer.allows.startswith("Allow once only") and why in offer.allows


@pytest.mark.fault("C1 session approval allowlist")
def test_git_is_not_covered_while_its_config_runs_a_program(workspace):
    _workspace_for(workspace)
    approved = shell_offer("git status", workspace)
    assert approved.kind == "read-only" and approved.prefix is not None
    assert offer_covers(approved.prefix, "git status --short", workspace)
    # a write the user allowed once (or a cloned hook) sets fsmonitor: `git status` would run it
    subprocess.run(["git", "-C", str(workspace), "config", "core.fsmonitor", "./pwn.sh"], check=True)
    assert not offer_covers(approved.prefix, "git status", workspace)
    assert "fsmonitor" in shell_offer("git status", workspace).allows


def test_read_only_and_exact_approvals_still_cover_what_they_say(workspace):
    _workspace_for(workspace)
    (workspace / "src").mkdir()
    ls = shell_offer("ls -la", workspace)
    assert ls.kind == "read-only" and ls.shown == "`ls` (read-only)"
    for later in ("ls src", "ls -lah src notes.md", "ls 'a file;with semicolon'", "ls -- -odd"):
        assert offer_covers(ls.prefix, later, workspace), later
    log = shell_offer("git log --oneline -n 5", workspace)
    assert log.shown == "`git log` (read-only)"
    assert offer_covers(log.prefix, "git log --stat -3 -- notes.md", workspace)
    assert not offer_covers(log.prefix, "git show HEAD", workspace)
    grep = shell_offer("grep -rn 'a/b' src", workspace)
    assert grep.kind == "read-only", grep.allows  # the pattern is not a path
    jq = shell_offer("jq . data.json", workspace)
    assert jq.kind == "exact" and jq.shown == "this exact command" and "exact command line" in jq.allows
    assert offer_covers(jq.prefix, "jq . data.json", workspace)
    assert not offer_covers(jq.prefix, "jq . other.json", workspace)


@pytest.fixture
def ui_config(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))


@pytest.mark.fault("C1 session approval allowlist")
async def test_the_dialog_says_which_approval_it_offers_and_why(tmp_path, ui_config):
    from textual.widgets import Button, Static

    script = [
        {"tool_calls": [call("run_shell", command="pytest -q")]},
        {"tool_calls": [call("run_shell", command="jq . data.json")]},
        {"text": "done"},
    ]
    agent = make_ui_agent(tmp_path, script=script)
    app = make_app(agent)

    def labels():
        return {b.id: str(b.label) for b in app.screen.query(Button)}

    def text():
        return "\n".join(str(s.render()) for s in app.screen.query(Static))

    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"go", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="approval")
        assert "prefix" not in labels()
        assert "Allow once only: a test runner runs code from the workspace" in text()
        await pilot.press("d")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, ApprovalScreen) and "jq" in str(app.screen.arguments),
            rounds=2000,
            what="the second approval",
        )
        assert labels()["prefix"] == "Allow this exact command for the session [p]"
        assert "covers this exact command line only" in text()
        await pilot.press("d")
        await wait_until(pilot, lambda: not app.running, rounds=2000, what="turn end")


# -- round two: where else git reads a config that runs a program, symlinks named bare, more runners --


def _git_status_runs_pwn(ws) -> bool:
    """Runs `git status` (it touches `pwned` in the test's tmp dir at worst): the case is real."""
    subprocess.run(["git", "status"], cwd=ws, capture_output=True, check=False, timeout=60)
    return (ws / "pwned").exists()


@pytest.mark.fault("C1 session approval allowlist (new cases, round two)")
@pytest.mark.parametrize(
    "setup",
    ["section and key on one line", "config.worktree", "a .git file pointing elsewhere", "the repository above the workspace"],
)
def test_a_git_config_that_runs_a_program_is_found_where_git_reads_it(tmp_path, setup):
    repo = tmp_path / "repo"
    repo.mkdir()
    ws = repo / "sub" if setup == "the repository above the workspace" else repo
    ws.mkdir(exist_ok=True)
    pwn = tmp_path / "pwn.sh"
    pwn.write_text(f"#!/bin/sh\ntouch {ws / 'pwned'}\n")
    pwn.chmod(0o755)
    if setup == "a .git file pointing elsewhere":
        subprocess.run(["git", "init", "-q", "--separate-git-dir", str(tmp_path / "elsewhere.git"), str(repo)], check=True)
    else:
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    approved = shell_offer("git status", ws)
    assert approved.kind == "read-only" and approved.prefix is not None
    gitdir = tmp_path / "elsewhere.git" if setup.startswith("a .git file") else repo / ".git"
    if setup == "section and key on one line":
        with open(gitdir / "config", "a") as f:
            f.write(f"[core] fsmonitor = {pwn}\n")
    elif setup == "config.worktree":
        subprocess.run(["git", "-C", str(repo), "config", "extensions.worktreeConfig", "true"], check=True)
        subprocess.run(["git", "-C", str(repo), "config", "--worktree", "core.fsmonitor", str(pwn)], check=True)
    else:
        subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", str(pwn)], check=True)
    assert not offer_covers(approved.prefix, "git status", ws), "asked again"
    assert shell_offer("git status", ws).kind is None
    assert _git_status_runs_pwn(ws), "git does run it: the case is real"


@pytest.mark.fault("C1 session approval allowlist (new cases, round two)")
def test_a_git_config_that_is_a_fifo_is_refused_without_waiting(tmp_path):
    import os

    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".git" / "config").unlink()
    os.mkfifo(ws / ".git" / "config")
    offer = shell_offer("git status", ws)  # git itself would wait on it forever: never run here
    assert offer.kind is None and "not a regular file" in offer.allows


@pytest.mark.fault("C1 session approval allowlist (new cases, round two)")
def test_git_s_own_fsmonitor_daemon_still_gets_a_session_approval(tmp_path):
    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "config", "core.fsmonitor", "false"], check=True)
    assert shell_offer("git status", ws).kind == "read-only"


@pytest.mark.fault("C1 session approval allowlist (new cases, round two)")
@pytest.mark.parametrize("command", ["jq . link-out", "wc -l link-out", "md5sum link-out", "jq . -- link-out"])
def test_an_exact_approval_never_covers_a_bare_name_that_is_a_symlink_out(workspace, command):
    _workspace_for(workspace)
    offer = shell_offer(command, workspace)
    assert offer.kind is None and "outside the workspace" in offer.allows, offer.allows
    (workspace / "inside.json").write_text("{}")
    (workspace / "link-in").symlink_to(workspace / "inside.json")
    assert shell_offer(command.replace("link-out", "link-in"), workspace).kind is not None, "a link inside is fine"


@pytest.mark.fault("C1 session approval allowlist (new cases, round two)")
@pytest.mark.parametrize(
    "command",
    [
        "eslint src",
        "prettier --write .",
        "mypy .",
        "pylint src",
        "ruff check .",
        "pre-commit run",
        "webpack",
        "tsc",
        "hg status",
        "gcc main.c",
        "m4 macros.m4",
        "ed notes.md",
        "nc -l 8080",
        "terraform plan",
        "tmux new -d",
    ],
)
def test_programs_whose_config_or_input_runs_code_are_allowed_once_only(workspace, command):
    _workspace_for(workspace)
    offer = shell_offer(command, workspace)
    assert offer.kind is None and offer.allows.startswith("Allow once only"), offer.allows
