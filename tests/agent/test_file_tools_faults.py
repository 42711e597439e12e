"""Hostile cases for the file tools and the workspace (issue 13): big diffs, FIFOs and
devices, a symlink swapped between check and use, hard links, the data dir inside
the workspace, the write tools' temp files, grep's opening of files. Each class is
marked `fault(...)` for benchmarks/fault_bench.py.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tailrent_tui.agent.tools import (
    ToolCaps,
    ToolContext,
    ToolOutcome,
    preview_tool,
    run_tool,
)
from tailrent_tui.agent.tools import grep as grep_tool
from tailrent_tui.store.paths import is_stale_temp

SECRET = "SECRET-outside-the-workspace"


def ctx_for(root: Path, data_dir: Path | None = None, **caps) -> ToolContext:
    return ToolContext(root=root, caps=ToolCaps(**caps), data_dir=data_dir or root.parent / "data")


def one_line_error(result: ToolOutcome) -> str:
    """An error outcome that is one line with no traceback; return its text."""
    assert result.is_error, result.content[:300]
    assert "\n" not in result.content, result.content[:300]
    assert "Traceback" not in result.content
    return result.content


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


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tailrent-tmp")]


# ----------------------------------------------------------- write_file big diff

_BIG = 200_000


def _lines(n: int, tag: str) -> str:
    return "".join(f"{tag} line {i}\n" for i in range(n))


BIG_DIFF_CASES = {
    "rewrite 200k lines": (_lines(_BIG, "old"), _lines(_BIG, "new")),
    "1 line grows to 200k": ("one\n", _lines(_BIG, "new")),
    "200k lines shrink to 1": (_lines(_BIG, "old"), "one\n"),
    "one 8 MB line changed": ("a" * 8_000_000 + "\n", "b" * 8_000_000 + "\n"),
    "binary old file": ("\x00\xff" * 10, _lines(_BIG, "new")),
}


@pytest.mark.fault("write_file big diff")
@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(BIG_DIFF_CASES))
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_big_diffs_are_bounded(ws: Path, case: str, tool: str) -> None:
    before, after = BIG_DIFF_CASES[case]
    target = ws / "big.txt"
    if before.startswith("\x00"):
        if tool == "edit_file":
            pytest.skip("edit_file refuses non-UTF-8 files (tested elsewhere)")
        target.write_bytes(b"\x00\xff" * 10)
    else:
        target.write_text(before)
    args = {"path": "big.txt", "content": after} if tool == "write_file" else {"path": "big.txt", "old": before, "new": after}
    ctx = ctx_for(ws)
    started = time.monotonic()
    shown = preview_tool(tool, args, ctx)
    result = run_tool(tool, args, ctx)
    elapsed = time.monotonic() - started
    assert shown is not None and not shown.is_error, shown.content[:300]
    assert not result.is_error, result.content[:300]
    assert len(result.content) < 100_000 and len(result.meta["diff"]) < 100_000
    assert len(shown.content) < 100_000
    assert "diff too large" in result.content or "diff not shown" in result.content
    assert target.read_text(encoding="utf-8", errors="replace") == after
    assert elapsed < 20


@pytest.mark.fault("write_file big diff")
@pytest.mark.parametrize("where", [1, 50_000, 99_999])
def test_a_small_change_in_a_big_file_gets_an_exact_diff(ws: Path, where: int) -> None:
    before = _lines(100_000, "x")
    after = before.replace(f"x line {where}\n", f"changed {where}\n")
    (ws / "f.txt").write_text(before)
    result = run_tool("write_file", {"path": "f.txt", "content": after}, ctx_for(ws))
    assert not result.is_error
    import difflib

    expected = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), "a/f.txt", "b/f.txt"))
    assert result.meta["diff"] == expected


_FAIL_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    from pathlib import Path
    from tailrent_tui.agent.tools import ToolContext, run_tool
    sys.dont_write_bytecode = True  # no bytecode cache cut short by the limit
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
    ws = Path(sys.argv[1])
    args = json.loads(sys.stdin.read())
    out = run_tool(args.pop("tool"), args, ToolContext(root=ws, data_dir=ws.parent / "data"))
    print(json.dumps({"is_error": out.is_error, "content": out.content}))
    """
)


@pytest.mark.fault("write_file big diff")
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "keep.txt", "content": "new " * 100_000}),
        ("edit_file", {"path": "keep.txt", "old": "original", "new": "grown " * 100_000}),
        ("write_file", {"path": "sub/new.txt", "content": "new " * 100_000}),
    ],
)
def test_a_failed_write_leaves_the_original(ws: Path, tool: str, args: dict) -> None:
    """A write that fails (the file-size limit here, a full disk in life) changes nothing."""
    (ws / "keep.txt").write_text("original content\n")
    (ws / "sub").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _FAIL_CHILD, str(ws), "4096"],
        input=json.dumps({"tool": tool, **args}),
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["is_error"] and "\n" not in result["content"], result
    assert "Traceback" not in result["content"]
    assert (ws / "keep.txt").read_text() == "original content\n"
    assert not (ws / "sub" / "new.txt").exists()
    assert leftovers(ws) == [] and leftovers(ws / "sub") == []


# ----------------------------------------------------------- FIFOs and devices


def _make_special(path: Path, kind: str) -> socket.socket | None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        return sock
    elif kind in ("char device", "block device"):
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        mode = stat.S_IFCHR if kind == "char device" else stat.S_IFBLK
        # 1,5 is /dev/zero (endless), 7,0 is loop0
        os.mknod(path, mode | 0o600, os.makedev(1, 5) if kind == "char device" else os.makedev(7, 0))
    return None


def _unblock(path: Path) -> None:
    # A tool stuck opening a FIFO is released by a peer opening the other end.
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


@pytest.mark.fault("FIFOs and devices")
@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "socket", "char device", "block device"])
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "special"}),
        ("write_file", {"path": "special", "content": "x\n"}),
        ("edit_file", {"path": "special", "old": "a", "new": "b"}),
        ("read_file", {"path": "alias"}),
        ("edit_file", {"path": "alias", "old": "a", "new": "b"}),
    ],
)
def test_special_files_are_refused_without_hanging(ws: Path, kind: str, tool: str, args: dict) -> None:
    special = ws / "special"
    sock = _make_special(special, kind)
    (ws / "alias").symlink_to("special")
    box: list[ToolOutcome] = []
    worker = threading.Thread(target=lambda: box.append(run_tool(tool, args, ctx_for(ws))), daemon=True)
    worker.start()
    worker.join(5)
    hung = worker.is_alive()
    if hung and kind == "fifo":
        _unblock(special)
        worker.join(5)
    if sock is not None:
        sock.close()
    assert not hung, f"{tool} hung on a {kind}"
    message = one_line_error(box[0])
    assert kind.split()[0] in message.lower()
    assert "regular" in message
    # and it is still what it was
    assert not stat.S_ISREG(os.lstat(special).st_mode)


# ----------------------------------------------------------- symlink race

_SWAPPER = textwrap.dedent(
    """
    import os, sys, time
    ws, outside, mode, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    d = os.path.join(ws, "d")
    name = d if mode == "dir vs link" else os.path.join(d, "f.txt")
    target = outside if mode == "dir vs link" else os.path.join(outside, "f.txt")
    tmp = os.path.join(ws, "swap.tmp")
    park = os.path.join(ws, "park.tmp")
    end = time.monotonic() + seconds

    def hold():
        # each state lasts about as long as a tool call's check, so checks and uses straddle swaps
        until = time.perf_counter() + 0.00005
        while time.perf_counter() < until:
            pass

    print("ready", flush=True)
    while time.monotonic() < end:
        try:
            os.rename(name, park)
            os.symlink(target, tmp)
            os.rename(tmp, name)
            hold()
            os.rename(park, name) if mode == "file vs link" else (os.unlink(name), os.rename(park, name))
            hold()
        except OSError:
            for leftover in (tmp,):
                try:
                    os.unlink(leftover)
                except OSError:
                    pass
            if os.path.lexists(park) and not os.path.lexists(name):
                os.rename(park, name)
            elif os.path.islink(name) and os.path.lexists(park):
                os.unlink(name)
                os.rename(park, name)
    """
)


def _setup_race(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("inside\n")


def _race(ws: Path, outside: Path, mode: str, attempt, attempts: int, seconds: float) -> tuple[int, int]:
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(ws), str(outside), mode, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "ready"
        tried = escapes = 0
        while tried < attempts and swapper.poll() is None:
            tried += 1
            escapes += attempt(tried)
    finally:
        swapper.kill()
        swapper.wait()
    return tried, escapes


@pytest.mark.fault("symlink race")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["dir vs link", "file vs link"])
@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "list_dir"])
def test_a_symlink_swapped_during_the_call_never_escapes(
    ws: Path, outside: Path, mode: str, tool: str, record_property, full_counts: bool
) -> None:
    _setup_race(ws)
    ctx = ctx_for(ws)
    secret_file = outside / "f.txt"

    def attempt(n: int) -> int:
        if tool == "read_file":
            out = run_tool("read_file", {"path": "d/f.txt"}, ctx)
            return int(SECRET in out.content)
        if tool == "list_dir":
            (outside / "only-outside.txt").touch()
            out = run_tool("list_dir", {"path": "d"}, ctx)
            return int("only-outside" in out.content)
        if tool == "write_file":
            name = "f.txt" if mode == "file vs link" else f"w{n % 50}.txt"
            out = run_tool("write_file", {"path": f"d/{name}", "content": "inside\n"}, ctx)
        else:
            out = run_tool("edit_file", {"path": "d/f.txt", "old": "\n", "new": "\n\n"}, ctx)
            if not out.is_error:
                run_tool("edit_file", {"path": "d/f.txt", "old": "\n\n", "new": "\n"}, ctx)
        escaped = (
            SECRET in out.content
            or secret_file.read_text() != SECRET + "\n"
            or any(p.name != "f.txt" and p.name != "only-outside.txt" for p in outside.iterdir())
        )
        if escaped:
            secret_file.write_text(SECRET + "\n")
            for p in outside.iterdir():
                if p.name not in ("f.txt", "only-outside.txt"):
                    p.unlink()
        return int(escaped)

    # the fault bench (--full-counts) races for up to 10 s and 5,000 or 1,500 calls, at least 500;
    # the suite for up to 4 s and a third of the calls, at least 150
    attempts = 5_000 if tool in ("read_file", "list_dir") else 1_500
    seconds, least = (10.0, 500) if full_counts else (4.0, 150)
    attempts = attempts if full_counts else attempts // 3
    tried, escapes = _race(ws, outside, mode, attempt, attempts, seconds=seconds)
    record_property("attempts", tried)
    record_property("escapes", escapes)
    print(f"symlink race {tool} ({mode}): {tried} attempts, {escapes} escapes")
    assert tried >= least
    assert escapes == 0, f"{escapes} of {tried} {tool} calls escaped the workspace"


# ----------------------------------------------------------- hard links


@pytest.mark.fault("hard links")
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "hl.txt"}),
        ("read_file", {"path": "hl.txt", "start": 1, "end": 1}),
        ("edit_file", {"path": "hl.txt", "old": "SECRET", "new": "public"}),
        ("write_file", {"path": "hl.txt", "content": "replaced\n"}),
        ("read_file", {"path": "alias.txt"}),
    ],
)
def test_a_hard_link_to_an_outside_file_is_refused(ws: Path, outside: Path, tool: str, args: dict) -> None:
    os.link(outside / "f.txt", ws / "hl.txt")
    (ws / "alias.txt").symlink_to("hl.txt")
    result = run_tool(tool, args, ctx_for(ws))
    message = one_line_error(result)
    assert SECRET not in message
    assert "hard link" in message
    assert (outside / "f.txt").read_text() == SECRET + "\n"
    shown = preview_tool(tool, args, ctx_for(ws))
    assert shown is None or (shown.is_error and SECRET not in shown.content)


# ----------------------------------------------------------- data dir in workspace


@pytest.fixture
def data_in_ws(ws: Path) -> Path:
    data = ws / ".tailrent"
    journal = data / "sessions" / "20260101-000000-abcdef" / "journal.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text('{"content": "TRANSCRIPT of another session"}\n')
    (ws / "notes").mkdir()
    (ws / "notes" / "sessions-link").symlink_to("../.tailrent/sessions")
    return data


_JOURNAL = ".tailrent/sessions/20260101-000000-abcdef/journal.jsonl"


@pytest.mark.fault("data dir in workspace")
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": _JOURNAL}),
        ("read_file", {"path": "notes/sessions-link/20260101-000000-abcdef/journal.jsonl"}),
        ("read_file", {"path": "ABS/" + _JOURNAL}),
        ("list_dir", {"path": ".tailrent/sessions"}),
        ("list_dir", {"path": "notes/sessions-link"}),
        ("list_dir", {"path": ".tailrent"}),
        ("edit_file", {"path": _JOURNAL, "old": "TRANSCRIPT", "new": "x"}),
        ("write_file", {"path": _JOURNAL, "content": "x"}),
        ("write_file", {"path": ".tailrent/sessions/new/planted.json", "content": "x"}),
    ],
)
def test_the_data_dir_inside_the_workspace_is_off_limits(ws: Path, data_in_ws: Path, tool: str, args: dict) -> None:
    args = {k: v.replace("ABS/", f"{ws}/") if isinstance(v, str) else v for k, v in args.items()}
    before = sorted(str(p) for p in data_in_ws.rglob("*"))
    result = run_tool(tool, args, ctx_for(ws, data_dir=data_in_ws))
    message = one_line_error(result)
    assert "TRANSCRIPT" not in message
    assert "data dir" in message
    assert sorted(str(p) for p in data_in_ws.rglob("*")) == before
    assert "TRANSCRIPT" in (data_in_ws / _JOURNAL.removeprefix(".tailrent/")).read_text()


@pytest.mark.fault("data dir in workspace")
@pytest.mark.parametrize("depth", ["", "a/b"])
def test_listing_hides_the_data_dir(ws: Path, depth: str) -> None:
    data = ws / depth / ".tailrent"
    (data / "sessions").mkdir(parents=True)
    (ws / depth / "kept.txt").write_text("x")
    result = run_tool("list_dir", {"path": depth or "."}, ctx_for(ws, data_dir=data))
    assert not result.is_error
    lines = result.content.splitlines()
    assert "kept.txt" in lines and ".tailrent/" not in lines
    assert "data dir" in result.content


@pytest.mark.fault("data dir in workspace")
async def test_the_agent_tells_its_tools_where_the_data_dir_is(make_agent, tmp_path: Path, workspace: Path) -> None:
    agent = make_agent(data_dir=workspace / ".tailrent")
    assert agent.tools.ctx.data_dir is not None
    assert Path(agent.tools.ctx.data_dir).resolve() == (workspace / ".tailrent").resolve()
    result = run_tool("list_dir", {"path": ".tailrent"}, agent.tools.ctx)
    assert result.is_error and "data dir" in result.content


@pytest.mark.fault("data dir in workspace")
@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "TRANSCRIPT"},
        {"pattern": "TRANSCRIPT", "path": "notes"},
        {"pattern": "TRANSCRIPT", "glob": "*.jsonl"},
        {"pattern": "TRANSCRIPT", "path": ".tailrent"},
        {"pattern": "TRANSCRIPT", "path": "notes/journal-link.jsonl"},
    ],
)
def test_grep_does_not_search_the_data_dir(ws: Path, data_in_ws: Path, args: dict) -> None:
    (ws / "notes" / "journal-link.jsonl").symlink_to(f"../{_JOURNAL}")
    (ws / "notes" / "mine.txt").write_text("no transcript here\n")
    result = run_tool("grep", args, ctx_for(ws, data_dir=data_in_ws))
    assert "TRANSCRIPT of another" not in result.content
    if result.is_error:
        assert "data dir" in one_line_error(result)


@pytest.mark.fault("data dir in workspace")
@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_tool_command_keeps_out_of_the_data_dir(ws: Path, data_in_ws: Path, how: str, monkeypatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tailrent_tui.cli import cli

    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("TAILRENT_HOME", raising=False)
    flags = ["--data-dir", str(data_in_ws)] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("TAILRENT_HOME", str(data_in_ws))
    args = ["tool", "read_file", json.dumps({"path": _JOURNAL}), "--workspace", str(ws)]
    result = CliRunner().invoke(cli, flags + args)
    assert "TRANSCRIPT" not in result.output
    assert "data dir" in result.output
    assert result.exit_code == 1


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


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
    out = run_tool(case.split()[0], _WRITES[case][1], ctx_for(ws))
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
    out = run_tool(case.split()[0], _WRITES[case][1], ctx_for(ws))
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
    out = run_tool("write_file", {"path": "f.txt", "content": "x\n"}, ctx_for(ws))
    assert not out.is_error, out.content
    assert os.path.lexists(name)
    assert (outside / "f.txt").read_text() == SECRET + "\n"


@pytest.mark.fault("stale temp files")
def test_a_long_file_name_still_gets_a_temp_file(ws: Path) -> None:
    name = "é" * 120 + ".txt"  # 244 bytes: the temp name must stay under 255
    out = run_tool("write_file", {"path": name, "content": "x\n"}, ctx_for(ws))
    assert not out.is_error, out.content
    assert (ws / name).read_text() == "x\n"
    assert _temps(ws) == []


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
    out = run_tool("grep", {"pattern": "SECRET|inside", "path": path}, ctx_for(ws, data_dir=data, grep_timeout=5))
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
        run_tool("grep", {"pattern": "SECRET"}, ctx_for(ws))
        if path == "."
        else run_tool("grep", {"pattern": "SECRET", "path": path}, ctx_for(ws))
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
    out = run_tool("grep", {"pattern": "inside", "path": "d"}, ctx_for(ws))
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
            out = run_tool("grep", {"pattern": "SECRET", "path": "d"}, ctx_for(ws))
            escapes += SECRET in out.content
    finally:
        swapper.kill()
        swapper.wait()
    record_property("attempts", tried)
    print(f"grep during live swaps: {tried} calls, {escapes} escapes")
    assert tried >= 30
    assert escapes == 0
