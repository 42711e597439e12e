"""Hostile cases of issue 13 left over by the first round: the file tools' temp files,
the decisions file, grep's opening of files, credentials in `tailrent config`, the
user's price sheets and `state.json`. Each class is marked `fault(...)` for
benchmarks/fault_bench.py.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.agent.tools import ToolCaps, ToolContext, run_tool
from tailrent_tui.agent.tools import grep as grep_tool
from tailrent_tui.cli import cli
from tailrent_tui.core.messages import Note
from tailrent_tui.models.spec import parse_model_spec
from tailrent_tui.models.text import redact
from tailrent_tui.store.paths import is_stale_temp

SECRET = "SECRET-outside-the-workspace"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _ctx(root: Path, data_dir: Path | None = None, **caps) -> ToolContext:
    return ToolContext(root=root, caps=ToolCaps(**caps), data_dir=data_dir or root.parent / "data")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "f.txt").write_text(SECRET + "\n")
    return out


def _temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if "tailrent-tmp" in p.name or p.name.endswith(".tmp"))


# ----------------------------------------------------------- stale temp files

_WRITES = {
    "write_file new": ("new.txt", {"path": "d/new.txt", "content": "hello\n"}),
    "write_file over": ("f.txt", {"path": "d/f.txt", "content": "hello\n"}),
    "edit_file": ("f.txt", {"path": "d/f.txt", "old": "old", "new": "new"}),
}


def _stale_set(d: Path) -> dict[str, Path]:
    """Temp files in `d`: what a write there must remove, and what it must keep."""
    hours_ago = time.time() - 2 * 3600
    days_ago = time.time() - 3 * 86400
    files = {
        "dead pid": d / f".f.txt.{_dead_pid()}.0123abcd.tailrent-tmp",
        "live pid, a day old": d / f".g.txt.{os.getppid()}.11112222.tailrent-tmp",
        "no pid (older tools), hours old": d / ".f.txt.89abcdef.tailrent-tmp",
        "live pid": d / f".f.txt.{os.getppid()}.0123abcd.tailrent-tmp",
        "no pid, young": d / ".h.txt.89abcdef.tailrent-tmp",
        "not ours: notes.tmp": d / "notes.tmp",
        "not ours: .hidden.tailrent-tmp": d / ".hidden.tailrent-tmp",
    }
    for p in files.values():
        p.write_text("partial")
    os.utime(files["live pid, a day old"], (days_ago, days_ago))
    os.utime(files["no pid (older tools), hours old"], (hours_ago, hours_ago))
    return files


_GOES = ("dead pid", "live pid, a day old", "no pid (older tools), hours old")


@pytest.mark.fault("stale temp files")
@pytest.mark.parametrize("case", list(_WRITES))
def test_the_write_tools_clean_stale_temp_files_in_the_target_directory(ws: Path, case: str) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("old\n")
    files = _stale_set(ws / "d")
    elsewhere = ws / f".f.txt.{_dead_pid()}.0123abcd.tailrent-tmp"  # another directory: not touched
    elsewhere.write_text("partial")
    out = run_tool(case.split()[0], _WRITES[case][1], _ctx(ws))
    assert not out.is_error, out.content
    for what, p in files.items():
        assert p.exists() is (what not in _GOES), what
    assert elsewhere.exists()


@pytest.mark.fault("stale temp files")
@pytest.mark.parametrize("case", list(_WRITES))
def test_the_write_tools_temp_file_names_its_writer(ws: Path, case: str, monkeypatch) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("old\n")
    seen: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:  # the moment the temp file is whole and not yet renamed
        seen.extend(n for n in os.listdir(ws / "d") if n.endswith(".tailrent-tmp"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    out = run_tool(case.split()[0], _WRITES[case][1], _ctx(ws))
    assert not out.is_error, out.content
    assert len(seen) == 1, seen
    assert f".{os.getpid()}." in seen[0]
    assert not is_stale_temp(seen[0], time.time())  # a live writer's file is never taken for stale
    assert is_stale_temp(seen[0].replace(f".{os.getpid()}.", f".{_dead_pid()}."), time.time())
    assert _temps(ws / "d") == []


@pytest.mark.fault("stale temp files")
@pytest.mark.parametrize("kind", ["symlink", "directory"])
def test_a_temp_name_that_is_not_a_file_is_left_alone(ws: Path, outside: Path, kind: str) -> None:
    name = ws / f".f.txt.{_dead_pid()}.0123abcd.tailrent-tmp"
    if kind == "symlink":
        name.symlink_to(outside / "f.txt")
    else:
        name.mkdir()
    out = run_tool("write_file", {"path": "f.txt", "content": "x\n"}, _ctx(ws))
    assert not out.is_error, out.content
    assert os.path.lexists(name)
    assert (outside / "f.txt").read_text() == SECRET + "\n"


@pytest.mark.fault("stale temp files")
def test_a_long_file_name_still_gets_a_temp_file(ws: Path) -> None:
    name = "é" * 120 + ".txt"  # 244 bytes: the temp name must stay under 255
    out = run_tool("write_file", {"path": name, "content": "x\n"}, _ctx(ws))
    assert not out.is_error, out.content
    assert (ws / name).read_text() == "x\n"
    assert _temps(ws) == []


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


# ----------------------------------------------------------- grep races and links


def _swap_after_listing(monkeypatch, swap) -> None:
    """Make `swap()` run after grep has listed (and checked) the files, before the search opens them."""
    listed = grep_tool._files_under

    def files_under(*args):
        listing = listed(*args)
        swap()
        return listing

    monkeypatch.setattr(grep_tool, "_files_under", files_under)


def _setup_grep(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("inside SECRET-not\n")
    (ws / "d" / "g.txt").write_text("inside too\n")


def _replace(path: Path, make) -> None:
    path.unlink()
    make(path)


SWAPS = {
    "file -> symlink to an outside file": lambda ws, out: _replace(ws / "d" / "f.txt", lambda p: p.symlink_to(out / "f.txt")),
    "file -> absolute symlink outside": lambda ws, out: _replace(ws / "d" / "f.txt", lambda p: p.symlink_to(str(out / "f.txt"))),
    "file -> hard link to an outside file": lambda ws, out: _replace(ws / "d" / "f.txt", lambda p: os.link(out / "f.txt", p)),
    "file -> FIFO": lambda ws, out: _replace(ws / "d" / "f.txt", os.mkfifo),
    "dir -> symlink to an outside dir": lambda ws, out: (
        os.rename(ws / "d", ws / "parked"),
        (ws / "d").symlink_to(out),
        (out / "g.txt").write_text(SECRET + "\n"),
    ),
    "file -> symlink into the data dir": lambda ws, out: _replace(
        ws / "d" / "f.txt", lambda p: p.symlink_to("../.tailrent/journal.jsonl")
    ),
}


@pytest.mark.fault("grep races and links")
@pytest.mark.parametrize("case", list(SWAPS))
@pytest.mark.parametrize("path", [".", "d", "d/f.txt"])
def test_grep_cannot_be_raced_out_of_the_workspace(ws: Path, outside: Path, monkeypatch, case: str, path: str) -> None:
    _setup_grep(ws)
    data = ws / ".tailrent"
    data.mkdir()
    (data / "journal.jsonl").write_text(SECRET + " transcript\n")
    _swap_after_listing(monkeypatch, lambda: SWAPS[case](ws, outside))
    start = time.monotonic()
    out = run_tool("grep", {"pattern": "SECRET|inside", "path": path}, _ctx(ws, data_dir=data, grep_timeout=5))
    assert time.monotonic() - start < 4, "grep waited on what it opened"
    assert SECRET not in out.content, out.content
    assert "Traceback" not in out.content
    if path != "d/f.txt" or not case.startswith("file"):
        return
    # the one file asked for was swapped: a one-line error that says why, as read_file gives
    assert out.is_error and "\n" not in out.content, out.content


@pytest.mark.fault("grep races and links")
@pytest.mark.parametrize("path", [".", "hl.txt", "sub"])
def test_grep_refuses_hard_linked_files(ws: Path, outside: Path, path: str) -> None:
    (ws / "sub").mkdir()
    os.link(outside / "f.txt", ws / "hl.txt")
    os.link(outside / "f.txt", ws / "sub" / "hl2.txt")
    (ws / "sub" / "plain.txt").write_text("SECRET-like but plain\n")
    out = (
        run_tool("grep", {"pattern": "SECRET"}, _ctx(ws))
        if path == "."
        else run_tool("grep", {"pattern": "SECRET", "path": path}, _ctx(ws))
    )
    assert SECRET not in out.content, out.content
    assert "hard link" in out.content
    if path == "hl.txt":
        assert out.is_error and "\n" not in out.content
    else:
        assert "SECRET-like but plain" in out.content
        assert out.meta["files_refused"] >= 1


@pytest.mark.fault("grep races and links")
def test_grep_swapped_to_a_symlink_inside_the_workspace_still_searches(ws: Path, outside: Path, monkeypatch) -> None:
    _setup_grep(ws)
    (ws / "other.txt").write_text("inside the other file\n")
    _swap_after_listing(monkeypatch, lambda: _replace(ws / "d" / "f.txt", lambda p: p.symlink_to("../other.txt")))
    out = run_tool("grep", {"pattern": "inside", "path": "d"}, _ctx(ws))
    assert "d/f.txt:1: inside the other file" in out.content
    assert out.meta["files_refused"] == 0


_GREP_SWAPPER = """
import os, sys, time
ws, outside, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
name, park, tmp = os.path.join(ws, "d", "f.txt"), os.path.join(ws, "d", "park"), os.path.join(ws, "d", "swap")
end = time.monotonic() + seconds
print("ready", flush=True)
while time.monotonic() < end:
    try:
        os.rename(name, park)
        os.symlink(os.path.join(outside, "f.txt"), tmp)
        os.rename(tmp, name)
        time.sleep(0.0005)
        os.rename(park, name)
        os.link(os.path.join(outside, "f.txt"), tmp)
        os.rename(name, park)
        os.rename(tmp, name)
        time.sleep(0.0005)
        os.unlink(name)
        os.rename(park, name)
    except OSError:
        pass
"""


@pytest.mark.fault("grep races and links")
@pytest.mark.timeout(120)
def test_grep_during_live_swaps_never_reads_outside(ws: Path, outside: Path, record_property) -> None:
    _setup_grep(ws)
    for i in range(30):
        (ws / "d" / f"pad{i}.txt").write_text("inside\n")
    swapper = subprocess.Popen(
        [sys.executable, "-c", _GREP_SWAPPER, str(ws), str(outside), "15"], stdout=subprocess.PIPE, text=True
    )
    tried = escapes = 0
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline and tried < 300:
            tried += 1
            out = run_tool("grep", {"pattern": "SECRET", "path": "d"}, _ctx(ws))
            escapes += SECRET in out.content
    finally:
        swapper.kill()
        swapper.wait()
    record_property("attempts", tried)
    print(f"grep during live swaps: {tried} calls, {escapes} escapes")
    assert tried >= 30
    assert escapes == 0


# ----------------------------------------------------------- credentials in URLs

REDACT_CASES = {
    "openai:u:SECRET@host": "openai:***@host",
    "openai:u:SECRET@host:8080#m": "openai:***@host:8080#m",
    "openai:SECRET@host:8080": "openai:***@host:8080",
    "openai: u:SECRET@host": "openai: ***@host",
    "OPENAI:u:SECRET@host": "OPENAI:***@host",
    "u:SECRET@host:8080": "***@host:8080",
    "could not reach 'u:SECRET@host:1'": "could not reach '***@host:1'",
    "OLLAMA_HOST=u:SECRET@h:1": "OLLAMA_HOST=***@h:1",
    "openai:http://u:SECRET@host": "openai:http://***@host",
    "https://u:SECRET@h/v1 and openai:v:SECRET@k": "https://***@h/v1 and openai:***@k",
    'model = "openai:u:SECRET@h"': 'model = "openai:***@h"',
}
KEPT = [
    "openai:http://127.0.0.1:8080#qwen",
    "openai:host:8080",
    "ollama:llama3.2",
    "mail alice@example.com",
    "at 10:30 today",
    "http://h:8080/v1#a",
]


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("text", list(REDACT_CASES))
def test_redact_hides_credentials_with_or_without_a_scheme(text: str) -> None:
    assert redact(text) == REDACT_CASES[text]


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("text", KEPT)
def test_redact_leaves_text_without_credentials(text: str) -> None:
    assert redact(text) == text


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("spec", ["openai:u:SECRET@host:1#m", "openai:SECRET@host:1"])
def test_a_schemeless_spec_is_shown_redacted(spec: str) -> None:
    assert "SECRET" not in str(parse_model_spec(spec))
    with pytest.raises(ValueError) as bad:  # noqa: PT011  (any message, as long as it hides the secret)
        parse_model_spec(spec.replace("host:1", "h:0"))
    assert "SECRET" not in str(bad.value)


@pytest.mark.fault("credentials in URLs")
@pytest.mark.parametrize("how", ["flag", "env", "config.toml"])
@pytest.mark.parametrize("spec", ["openai:http://u:SECRET@127.0.0.1:9#m", "openai:u:SECRET@127.0.0.1:9"])
@pytest.mark.parametrize("as_json", [False, True])
def test_config_prints_the_model_without_its_credentials(tmp_path: Path, monkeypatch, how: str, spec: str, as_json: bool) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "home"))
    args = ["config"] + (["--json"] if as_json else [])
    if how == "flag":
        args = ["--model", spec, *args]
    elif how == "env":
        monkeypatch.setenv("TAILRENT_MODEL", spec)
    else:
        (cfg / "config.toml").write_text(f"model = {json.dumps(spec)}\n")
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "SECRET" not in result.output
    assert "***@127.0.0.1:9" in result.output


# ----------------------------------------------------------- price files

_MY_SHEET = """
[my-sheet]
description = "mine"
input_per_mtok = 1.0
cache_write_multiplier = 1.0
cache_read_multiplier = 0.1
output_per_mtok = 2.0
min_cacheable = 0
ttl_seconds = 300
"""


def _bench(tmp_path: Path, monkeypatch, *, config_dir: str | None, xdg_sheet: bool, cfg_sheet: str | None):
    cfg, xdg = tmp_path / "cfg", tmp_path / "xdg"
    cfg.mkdir(exist_ok=True)
    (xdg / "tailrent").mkdir(parents=True, exist_ok=True)
    if xdg_sheet:
        (xdg / "tailrent" / "prices.toml").write_text(_MY_SHEET)
    if cfg_sheet is not None:
        (cfg / "prices.toml").write_text(cfg_sheet)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("TAILRENT_HOME", str(tmp_path / "home"))
    if config_dir is None:
        monkeypatch.delenv("TAILRENT_CONFIG_DIR", raising=False)
    else:
        monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(cfg) if config_dir == "cfg" else config_dir)
    return CliRunner().invoke(
        cli,
        ["bench", "--trace", "article", "--policy", "ladder", "--tokenizer", "chars4", "--price", "my-sheet", "--json"],
    )


@pytest.mark.fault("price files")
@pytest.mark.parametrize(
    "case",
    [
        "sheet in TAILRENT_CONFIG_DIR",
        "sheet only in the platform dir, TAILRENT_CONFIG_DIR set",
        "garbage prices.toml in TAILRENT_CONFIG_DIR",
        "sheet in the platform dir, TAILRENT_CONFIG_DIR empty",
    ],
)
def test_bench_reads_the_price_sheets_where_every_command_does(tmp_path: Path, monkeypatch, case: str) -> None:
    if sys.platform == "darwin":
        pytest.skip("the platform config dir is not XDG_CONFIG_HOME on macOS")
    if case == "sheet in TAILRENT_CONFIG_DIR":
        result = _bench(tmp_path, monkeypatch, config_dir="cfg", xdg_sheet=False, cfg_sheet=_MY_SHEET)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["extras"][0]["price_sheet"] == "my-sheet"
    elif case == "sheet only in the platform dir, TAILRENT_CONFIG_DIR set":
        result = _bench(tmp_path, monkeypatch, config_dir="cfg", xdg_sheet=True, cfg_sheet=None)
        assert result.exit_code != 0
        assert "unknown price sheet 'my-sheet'" in result.output
    elif case == "garbage prices.toml in TAILRENT_CONFIG_DIR":
        result = _bench(tmp_path, monkeypatch, config_dir="cfg", xdg_sheet=True, cfg_sheet="[my-sheet\nnot toml")
        assert result.exit_code != 0
        assert "prices.toml" in result.output and "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit)
    else:
        result = _bench(tmp_path, monkeypatch, config_dir="", xdg_sheet=True, cfg_sheet=None)
        assert result.exit_code == 0, result.output


@pytest.mark.fault("price files")
async def test_the_agent_and_bench_share_one_price_file_lookup(make_agent, tmp_path: Path, monkeypatch) -> None:
    import tailrent_tui.commands.bench as bench_cmd
    from tailrent_tui import settings
    from tailrent_tui.agent import build

    assert build.user_price_files is settings.user_price_files
    assert bench_cmd.user_price_files is settings.user_price_files
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "prices.toml").write_text(_MY_SHEET)
    agent = make_agent(price_sheet="my-sheet")
    assert agent.rent is not None and agent.rent.sheet.name == "my-sheet"


# ----------------------------------------------------------- state.json


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "cfg"
    d.mkdir()
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(d))
    return d


@pytest.mark.fault("state.json")
def test_state_json_is_written_through_a_pid_named_temp_file(cfg: Path, monkeypatch) -> None:
    from tailrent_tui.settings import save_user_choice

    seen: list[str] = []
    real_replace = os.replace

    def spy(src, dst, *a, **kw):
        seen.append(os.path.basename(src))
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", spy)
    save_user_choice("theme", "nord")
    assert len(seen) == 1 and f".{os.getpid()}." in seen[0] and seen[0].endswith(".tailrent-tmp"), seen
    assert json.loads((cfg / "state.json").read_text()) == {"theme": "nord"}
    assert (cfg / "state.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in cfg.iterdir()) == ["state.json"]


@pytest.mark.fault("state.json")
def test_state_json_cleans_what_killed_writers_left(cfg: Path) -> None:
    from tailrent_tui.settings import save_user_choice

    dead = cfg / f".state.json.{_dead_pid()}.0123abcd.tailrent-tmp"
    live = cfg / f".state.json.{os.getppid()}.0123abcd.tailrent-tmp"
    old_fixed = cfg / "state.tmp"  # the fixed name older versions used
    for p in (dead, live, old_fixed):
        p.write_text('{"theme": "half')
    hours_ago = time.time() - 2 * 3600
    os.utime(old_fixed, (hours_ago, hours_ago))
    save_user_choice("theme", "nord")
    assert not dead.exists() and not old_fixed.exists()
    assert live.exists()
    assert json.loads((cfg / "state.json").read_text()) == {"theme": "nord"}


_SAVER = """
import sys
from tailrent_tui.settings import save_user_choice
for i in range(int(sys.argv[1])):
    save_user_choice("theme", f"t{i}")
"""


@pytest.mark.fault("state.json")
@pytest.mark.timeout(120)
def test_two_processes_saving_choices_do_not_collide(cfg: Path) -> None:
    env = {**os.environ, "TAILRENT_CONFIG_DIR": str(cfg)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _SAVER, "150"], env=env, stderr=subprocess.PIPE, text=True) for _ in range(4)
    ]
    errors = [p.communicate(timeout=100)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), [e.strip().splitlines()[-1:] for e in errors]
    assert json.loads((cfg / "state.json").read_text())["theme"].startswith("t")
    assert sorted(p.name for p in cfg.iterdir()) == ["state.json"]


@pytest.mark.fault("state.json")
@pytest.mark.timeout(120)
def test_a_kill_while_saving_leaves_a_whole_state_json(cfg: Path) -> None:
    env = {**os.environ, "TAILRENT_CONFIG_DIR": str(cfg)}
    for i in range(15):
        p = subprocess.Popen([sys.executable, "-c", _SAVER, "100000"], env=env, stderr=subprocess.DEVNULL)
        time.sleep(0.3 + 0.02 * i)
        p.kill()
        p.wait()
        if (cfg / "state.json").exists():
            assert json.loads((cfg / "state.json").read_text())["theme"].startswith("t")
    from tailrent_tui.settings import save_user_choice

    save_user_choice("theme", "nord")  # the next save cleans what the kills left
    assert sorted(p.name for p in cfg.iterdir()) == ["state.json"]
