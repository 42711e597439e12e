"""The workspace tools: rung 1 caps, path safety, and the registry's never-raise door."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from tailrent_tui.agent import tools as registry
from tailrent_tui.agent.tools import (
    TOOLS,
    ToolCaps,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    offered_tools,
    parse_args,
    preview_tool,
    register,
    run_tool,
    tool_specs,
    unregister,
)
from tailrent_tui.agent.workspace import WorkspaceEscape, resolve_in_workspace
from tailrent_tui.models.base import wire_tools


def make_ctx(root: Path, **caps) -> ToolContext:
    return ToolContext(root=root, caps=ToolCaps(**caps))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workspace, with a secret the tools must never reach."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("the secret\n")
    return out


def wait_until_gone(pid: int, within: float = 10.0) -> bool:
    """True once pid no longer runs (gone, or a zombie that nobody has reaped yet)."""
    try:
        proc = psutil.Process(pid)
        proc.wait(timeout=within)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        try:
            return proc.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
    return True


# ---------------------------------------------------------------- workspace


def test_relative_and_absolute_paths_inside_resolve(ws: Path) -> None:
    (ws / "a").mkdir()
    (ws / "a" / "f.txt").write_text("x")
    assert resolve_in_workspace(ws, "a/f.txt") == (ws / "a" / "f.txt").resolve()
    assert resolve_in_workspace(ws, str(ws / "a" / "f.txt")) == (ws / "a" / "f.txt").resolve()
    assert resolve_in_workspace(ws, "a/../a/f.txt") == (ws / "a" / "f.txt").resolve()
    assert resolve_in_workspace(ws, "not/yet/there.txt") == ws.resolve() / "not/yet/there.txt"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("../outside/secret.txt", "'..'"),
        ("a/../../outside/secret.txt", "'..'"),
        ("~/secret.txt", "'~'"),
        ("~root/.bashrc", "'~'"),
    ],
)
def test_escapes_are_refused(ws: Path, outside: Path, path: str, words: str) -> None:
    with pytest.raises(WorkspaceEscape) as info:
        resolve_in_workspace(ws, path)
    assert words in str(info.value)
    assert path in str(info.value)


def test_absolute_path_outside_is_refused(ws: Path, outside: Path) -> None:
    with pytest.raises(WorkspaceEscape, match="absolute path outside the workspace"):
        resolve_in_workspace(ws, str(outside / "secret.txt"))
    with pytest.raises(WorkspaceEscape):
        resolve_in_workspace(ws, "/etc/passwd")


def test_symlinks_out_are_refused_even_for_new_files(ws: Path, outside: Path) -> None:
    (ws / "link_dir").symlink_to(outside)
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "dangling").symlink_to(outside / "not_yet.txt")
    for path in ("link_dir/secret.txt", "link_file", "link_dir/new.txt", "dangling"):
        with pytest.raises(WorkspaceEscape, match="symlink"):
            resolve_in_workspace(ws, path)


def test_symlink_inside_the_workspace_is_fine(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "f.txt").write_text("x")
    (ws / "alias").symlink_to(ws / "real")
    assert resolve_in_workspace(ws, "alias/f.txt") == (ws / "real" / "f.txt").resolve()


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "~/secret.txt"}),
        ("list_dir", {"path": ".."}),
        ("grep", {"pattern": "secret", "path": "../outside"}),
        ("read_file", {"path": "link/secret.txt"}),
        ("grep", {"pattern": "secret", "path": "link"}),
    ],
)
def test_tools_refuse_escapes_with_a_tool_error(ws: Path, outside: Path, tool: str, args: dict) -> None:
    (ws / "link").symlink_to(outside)
    result = run_tool(tool, args, make_ctx(ws))
    assert result.is_error
    assert "refused path" in result.content
    assert "the secret" not in result.content


def test_absolute_outside_refused_by_read_file(ws: Path, outside: Path) -> None:
    result = run_tool("read_file", {"path": str(outside / "secret.txt")}, make_ctx(ws))
    assert result.is_error and "absolute path outside" in result.content


def test_writes_through_escapes_create_nothing_outside(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside)
    (ws / "dangling").symlink_to(outside / "planted.txt")
    ctx = make_ctx(ws)
    for path in ("../outside/planted.txt", "link/planted.txt", "dangling", str(outside / "planted.txt")):
        result = run_tool("write_file", {"path": path, "content": "pwned"}, ctx)
        assert result.is_error, path
        assert "refused path" in result.content
    result = run_tool("edit_file", {"path": "link/secret.txt", "old": "secret", "new": "x"}, ctx)
    assert result.is_error
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "the secret\n"


def test_grep_does_not_follow_symlinks_out_of_the_workspace(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside)
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "mine.txt").write_text("no secret here\n")
    result = run_tool("grep", {"pattern": "secret"}, make_ctx(ws))
    assert not result.is_error
    assert result.content.splitlines() == ["mine.txt:1: no secret here"]


# ---------------------------------------------------------------- read_file


def numbered_file(path: Path, n: int) -> None:
    path.write_text("".join(f"line {i}\n" for i in range(1, n + 1)))


def test_read_file_whole_and_range(ws: Path) -> None:
    numbered_file(ws / "f.txt", 30)
    ctx = make_ctx(ws)
    whole = run_tool("read_file", {"path": "f.txt"}, ctx)
    assert whole.content == (ws / "f.txt").read_text().rstrip("\n")
    assert whole.cut is None and not whole.is_error
    part = run_tool("read_file", {"path": "f.txt", "start": 5, "end": 7}, ctx)
    assert part.content.splitlines() == ["line 5", "line 6", "line 7"]


def test_read_file_default_cap_is_2000_lines_and_says_how_to_read_on(ws: Path) -> None:
    numbered_file(ws / "big.txt", 2500)
    ctx = make_ctx(ws)
    first = run_tool("read_file", {"path": "big.txt"}, ctx)
    body = first.content.splitlines()
    assert body[:2000] == [f"line {i}" for i in range(1, 2001)]
    assert len(body) == 2001 and body[-1] == first.cut
    assert "2,500" in first.cut and "start=2001" in first.cut
    rest = run_tool("read_file", {"path": "big.txt", "start": 2001}, ctx)
    assert rest.cut is None
    assert rest.content.splitlines() == [f"line {i}" for i in range(2001, 2501)]


def test_read_file_cap_applies_to_a_range(ws: Path) -> None:
    numbered_file(ws / "f.txt", 100)
    result = run_tool("read_file", {"path": "f.txt", "start": 10, "end": 60}, make_ctx(ws, read_file_max_lines=20))
    assert result.content.splitlines()[:20] == [f"line {i}" for i in range(10, 30)]
    assert "start=30" in result.cut


def test_read_file_byte_cap_bounds_a_giant_line(ws: Path) -> None:
    (ws / "min.js").write_bytes(b"a" * 500_000 + b"\nsecond\n")
    result = run_tool("read_file", {"path": "min.js"}, make_ctx(ws, read_file_max_bytes=1000))
    assert result.content.splitlines()[0] == "a" * 1000
    assert "second" not in result.content
    assert "1,000-byte cap" in result.cut and "start=2" in result.cut


def test_read_file_refuses_a_binary_file_and_decodes_other_bytes_with_replacement(ws: Path) -> None:
    blob = bytes(range(256)) * 4
    (ws / "blob.bin").write_bytes(blob)
    refused = run_tool("read_file", {"path": "blob.bin"}, make_ctx(ws))
    assert refused.is_error and "blob.bin is a binary file" in refused.content and "\n" not in refused.content
    latin1 = "caf\xe9 cr\xe8me\n".encode("latin-1") * 4  # not UTF-8, but text: no NUL
    (ws / "menu.txt").write_bytes(latin1)
    result = run_tool("read_file", {"path": "menu.txt"}, make_ctx(ws))
    assert result.binary and not result.is_error
    assert f"{len(latin1):,} bytes decoded with replacement" in result.content
    assert "caf\ufffd" in result.content


def test_read_file_refuses_a_blob_without_a_nul(ws: Path) -> None:
    """A compressed or random blob can go kilobytes without a NUL: mostly not text is binary too."""
    import random

    rng = random.Random(7)
    blob = bytes(rng.choice(range(1, 256)) for _ in range(20_000))
    (ws / "data.gz").write_bytes(blob)
    refused = run_tool("read_file", {"path": "data.gz"}, make_ctx(ws))
    assert refused.is_error and "data.gz is a binary file" in refused.content and "are not text" in refused.content
    # text with a few stray bytes is still text (the latin-1 case above), and so is a coloured log
    (ws / "log.txt").write_bytes(b"\x1b[31mERROR\x1b[0m disk full\n" * 400)
    assert not run_tool("read_file", {"path": "log.txt"}, make_ctx(ws)).is_error


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"path": "f.txt", "start": 99}, "past the end"),
        ({"path": "f.txt", "start": 5, "end": 2}, "before start"),
        ({"path": "sub"}, "is a directory"),
        ({"path": "nope.txt"}, "no such file"),
    ],
)
def test_read_file_faults(ws: Path, args: dict, words: str) -> None:
    numbered_file(ws / "f.txt", 10)
    (ws / "sub").mkdir()
    result = run_tool("read_file", args, make_ctx(ws))
    assert result.is_error and words in result.content


# ---------------------------------------------------------------- list_dir


def test_list_dir_sorted_with_dirs_marked(ws: Path) -> None:
    (ws / "b.txt").write_text("")
    (ws / "a_dir").mkdir()
    (ws / "c.txt").write_text("")
    result = run_tool("list_dir", {}, make_ctx(ws))
    assert result.content.splitlines() == ["a_dir/", "b.txt", "c.txt"]
    assert result.cut is None


def test_list_dir_default_cap_is_200_entries(ws: Path) -> None:
    names = [f"f{i:04d}.txt" for i in range(250)]
    for name in names:
        (ws / name).write_text("")
    result = run_tool("list_dir", {"path": "."}, make_ctx(ws))
    lines = result.content.splitlines()
    assert lines[:200] == sorted(names)[:200]
    assert lines[-1] == result.cut and len(lines) == 201
    assert "200 of 250" in result.cut
    assert result.meta["entries"] == 250


def test_list_dir_faults(ws: Path) -> None:
    (ws / "f.txt").write_text("")
    (ws / "empty").mkdir()
    ctx = make_ctx(ws)
    assert "is a file" in run_tool("list_dir", {"path": "f.txt"}, ctx).content
    assert "no such directory" in run_tool("list_dir", {"path": "gone"}, ctx).content
    empty = run_tool("list_dir", {"path": "empty"}, ctx)
    assert not empty.is_error and "empty" in empty.content


# ---------------------------------------------------------------- grep


def test_grep_finds_lines_with_paths_and_numbers(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("import os\nTODO: fix\n")
    (ws / "notes.md").write_text("nothing\nTODO later\n")
    result = run_tool("grep", {"pattern": r"TODO"}, make_ctx(ws))
    assert result.content.splitlines() == ["notes.md:2: TODO later", "src/a.py:2: TODO: fix"]
    only_py = run_tool("grep", {"pattern": "TODO", "glob": "*.py"}, make_ctx(ws))
    assert only_py.content.splitlines() == ["src/a.py:2: TODO: fix"]
    in_src = run_tool("grep", {"pattern": "TODO", "path": "src"}, make_ctx(ws))
    assert in_src.content.splitlines() == ["src/a.py:2: TODO: fix"]


def test_grep_default_cap_is_50_matches_with_the_total(ws: Path) -> None:
    for f in range(3):
        (ws / f"f{f}.txt").write_text("".join(f"hit {i}\n" for i in range(20)))
    result = run_tool("grep", {"pattern": "hit"}, make_ctx(ws))
    lines = result.content.splitlines()
    assert len(lines) == 51 and lines[-1] == result.cut
    assert "50 of 60 matches" in result.cut
    assert result.meta["matches"] == 60


def test_grep_stops_counting_past_the_count_limit(ws: Path) -> None:
    (ws / "f.txt").write_text("x\n" * 500)
    result = run_tool("grep", {"pattern": "x"}, make_ctx(ws, grep_max_matches=5, grep_count_limit=100))
    assert "5 of at least 100 matches" in result.cut


def test_grep_skips_binary_files_and_git(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("needle\n")
    (ws / "blob.bin").write_bytes(b"needle\x00\x01\x02")
    (ws / "text.txt").write_text("needle\n")
    result = run_tool("grep", {"pattern": "needle"}, make_ctx(ws))
    assert result.content.splitlines() == ["text.txt:1: needle"]
    assert result.meta["binary_files_skipped"] == 1


def test_grep_shortens_long_lines(ws: Path) -> None:
    (ws / "f.txt").write_text("needle" + "z" * 5000 + "\n")
    result = run_tool("grep", {"pattern": "needle"}, make_ctx(ws, grep_max_line_chars=100))
    assert len(result.content) < 200 and "shortened" in result.content


def test_grep_faults(ws: Path) -> None:
    (ws / "f.txt").write_text("abc\n")
    ctx = make_ctx(ws)
    bad = run_tool("grep", {"pattern": "(unclosed"}, ctx)
    assert bad.is_error and "invalid regular expression" in bad.content
    none = run_tool("grep", {"pattern": "zzz"}, ctx)
    assert not none.is_error and "no matches" in none.content
    missing = run_tool("grep", {"pattern": "a", "path": "gone"}, ctx)
    assert missing.is_error and "no such file or directory" in missing.content


# ---------------------------------------------------------------- run_shell


def test_run_shell_reports_output_and_exit_code(ws: Path) -> None:
    result = run_tool("run_shell", {"command": "echo out; echo err >&2; pwd; exit 3"}, make_ctx(ws))
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[:3] == ["out", "err", str(ws.resolve())]
    assert "exit code 3" in lines[3]
    assert result.meta["exit_code"] == 3


def test_run_shell_timeout_kills_the_whole_process_group(ws: Path) -> None:
    command = "sleep 60 & echo $! > bg.pid; echo started; wait"
    result = run_tool("run_shell", {"command": command, "timeout": 0.5}, make_ctx(ws))
    assert result.is_error and result.meta["timed_out"]
    assert "timed out after 0.5 s" in result.cut and "killed the process group" in result.cut
    assert result.content.startswith("started")
    assert result.meta["seconds"] < 30
    pid = int((ws / "bg.pid").read_text())
    assert wait_until_gone(pid), f"background child {pid} survived the timeout"
    assert wait_until_gone(result.meta["pid"])


def test_run_shell_returns_when_the_shell_exits_though_a_background_child_holds_the_pipe(ws: Path) -> None:
    import signal

    result = run_tool("run_shell", {"command": "sleep 60 & echo $! > bg.pid; echo done", "timeout": 30}, make_ctx(ws))
    pid = int((ws / "bg.pid").read_text())
    try:
        assert not result.meta["timed_out"] and result.meta["exit_code"] == 0
        assert result.content.startswith("done")
    finally:
        os.kill(pid, signal.SIGKILL)
    assert wait_until_gone(pid)


def test_run_shell_timeout_is_capped_and_defaulted(ws: Path) -> None:
    ctx = make_ctx(ws, shell_timeout=7.0, shell_timeout_max=9.0)
    assert run_tool("run_shell", {"command": "true"}, ctx).meta["timeout"] == 7.0
    assert run_tool("run_shell", {"command": "true", "timeout": 1000}, ctx).meta["timeout"] == 9.0
    bad = run_tool("run_shell", {"command": "true", "timeout": 0}, ctx)
    assert bad.is_error and "timeout" in bad.content


def test_run_shell_byte_cap_keeps_the_head_and_kills_a_runaway(ws: Path) -> None:
    ctx = make_ctx(ws, shell_max_bytes=1000, shell_discard_max_bytes=100_000)
    result = run_tool("run_shell", {"command": "yes", "timeout": 60}, ctx)
    assert not result.meta["timed_out"] and result.meta["killed"]
    body = result.content.split("\n[exit code")[0]
    assert len(body.encode()) <= 1000 and body.startswith("y\ny\n")
    assert "output cut at 1,000 bytes" in result.cut and "killed" in result.cut
    assert result.spilled_path is None


def test_run_shell_streams_everything_past_the_cap_into_the_spill_sink(ws: Path, tmp_path: Path) -> None:
    spill = tmp_path / "spill.out"
    opened = []

    def sink():
        fh = spill.open("wb")
        opened.append(fh)
        return fh, str(spill)

    ctx = ToolContext(root=ws, caps=ToolCaps(shell_max_bytes=1000), spill_sink=sink)
    command = "head -c 300000 /dev/zero | tr '\\0' x; echo; echo tail-marker"
    result = run_tool("run_shell", {"command": command}, ctx)
    assert not result.is_error and result.meta["exit_code"] == 0
    assert result.spilled_path == str(spill)
    data = spill.read_bytes()
    assert data == b"x" * 300000 + b"\ntail-marker\n"
    assert result.meta["bytes"] == len(data)
    assert result.content.startswith("x" * 1000 + "\n")
    assert "x" * 1001 not in result.content
    assert str(spill) in result.cut and f"{len(data):,} bytes" in result.cut
    assert opened[0].closed


def test_run_shell_spill_failure_keeps_the_head_and_says_why(ws: Path) -> None:
    import errno
    import io

    class FullDisk(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    caps = ToolCaps(shell_max_bytes=1000, shell_discard_max_bytes=100_000)
    ctx = ToolContext(root=ws, caps=caps, spill_sink=lambda: (FullDisk(), "spill-x"))
    result = run_tool("run_shell", {"command": "yes", "timeout": 60}, ctx)
    assert not result.is_error and result.meta["killed"] and not result.meta["timed_out"]
    assert result.content.startswith("y\ny\n")
    assert "No space left on device" in result.cut
    assert result.spilled_path is None


def test_run_shell_under_the_cap_never_opens_the_sink(ws: Path) -> None:
    def sink():
        raise AssertionError("the sink must not be opened for small output")

    ctx = ToolContext(root=ws, spill_sink=sink)
    result = run_tool("run_shell", {"command": "echo small"}, ctx)
    assert result.content.startswith("small") and result.spilled_path is None


def test_run_shell_binary_output_is_marked(ws: Path) -> None:
    result = run_tool("run_shell", {"command": r"printf 'ab\377\376cd\000'"}, make_ctx(ws))
    assert result.binary
    assert "[binary or non-UTF-8 output: 7 bytes decoded with replacement]" in result.content
    assert result.content.startswith("ab\ufffd\ufffdcd\ufffd")


def test_run_shell_cut_inside_a_utf8_character_is_not_binary(ws: Path) -> None:
    result = run_tool("run_shell", {"command": r"printf 'abc\303\251def'"}, make_ctx(ws, shell_max_bytes=4))
    assert not result.binary
    assert result.content.startswith("abc\n")


# ---------------------------------------------------------------- write_file / edit_file


def test_write_file_creates_parents_and_reports(ws: Path) -> None:
    result = run_tool("write_file", {"path": "deep/er/new.txt", "content": "one\ntwo\n"}, make_ctx(ws))
    assert not result.is_error
    assert (ws / "deep/er/new.txt").read_text() == "one\ntwo\n"
    assert result.meta["created"] and result.meta["lines"] == 2


def test_write_file_overwrite_has_a_diff_and_preview_writes_nothing(ws: Path) -> None:
    (ws / "f.txt").write_text("old line\n")
    ctx = make_ctx(ws)
    preview = preview_tool("write_file", {"path": "f.txt", "content": "new line\n"}, ctx)
    assert (ws / "f.txt").read_text() == "old line\n"
    assert "-old line" in preview.meta["diff"] and "+new line" in preview.meta["diff"]
    result = run_tool("write_file", {"path": "f.txt", "content": "new line\n"}, ctx)
    assert (ws / "f.txt").read_text() == "new line\n"
    assert result.meta["diff"] == preview.meta["diff"]
    assert not result.meta["created"]


def test_write_file_onto_a_directory_is_an_error(ws: Path) -> None:
    (ws / "d").mkdir()
    result = run_tool("write_file", {"path": "d", "content": "x"}, make_ctx(ws))
    assert result.is_error and "directory" in result.content


def test_edit_file_replaces_once_with_a_diff(ws: Path) -> None:
    (ws / "app.py").write_bytes(b"a = 1\r\nb = 2\r\nc = 3\r\n")
    ctx = make_ctx(ws)
    preview = preview_tool("edit_file", {"path": "app.py", "old": "b = 2", "new": "b = 20"}, ctx)
    assert (ws / "app.py").read_bytes() == b"a = 1\r\nb = 2\r\nc = 3\r\n"
    result = run_tool("edit_file", {"path": "app.py", "old": "b = 2", "new": "b = 20"}, ctx)
    assert not result.is_error
    assert (ws / "app.py").read_bytes() == b"a = 1\r\nb = 20\r\nc = 3\r\n"
    diff = result.meta["diff"]
    assert diff == preview.meta["diff"]
    changed = [line for line in diff.split("\n") if line.startswith(("+", "-")) and line[:3] not in ("+++", "---")]
    assert changed == ["-b = 2\r", "+b = 20\r"]
    assert diff.rstrip("\n") in result.content and result.meta["line"] == 2


def test_edit_file_keeps_the_file_mode(ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o755)
    run_tool("edit_file", {"path": "run.sh", "old": "one", "new": "two"}, make_ctx(ws))
    assert script.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in ws.iterdir()) == ["run.sh"]


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("missing", "x", "not found"),
        ("dup", "x", "occurs 3 times"),
        ("", "x", "old is empty"),
        ("dup", "dup", "the same"),
    ],
)
def test_edit_file_faults_leave_the_file_alone(ws: Path, old: str, new: str, words: str) -> None:
    original = "dup\nmid\ndup\ndup\n"
    (ws / "f.txt").write_text(original)
    result = run_tool("edit_file", {"path": "f.txt", "old": old, "new": new}, make_ctx(ws))
    assert result.is_error and words in result.content
    assert (ws / "f.txt").read_text() == original


def test_edit_file_ambiguity_names_the_lines(ws: Path) -> None:
    (ws / "f.txt").write_text("dup\nmid\ndup\ndup\n")
    result = run_tool("edit_file", {"path": "f.txt", "old": "dup", "new": "x"}, make_ctx(ws))
    assert "lines 1, 3, 4" in result.content


def test_edit_file_refuses_non_utf8_and_missing(ws: Path) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    ctx = make_ctx(ws)
    bad = run_tool("edit_file", {"path": "latin.txt", "old": "caf", "new": "x"}, ctx)
    assert bad.is_error and "not UTF-8" in bad.content
    assert (ws / "latin.txt").read_bytes() == b"caf\xe9\n"
    gone = run_tool("edit_file", {"path": "gone.txt", "old": "a", "new": "b"}, ctx)
    assert gone.is_error and "write_file" in gone.content


# ---------------------------------------------------------------- registry


def test_specs_are_offered_and_approval_marked() -> None:
    names = [s.name for s in tool_specs()]
    assert {"read_file", "list_dir", "grep", "run_shell", "write_file", "edit_file"} <= set(names)
    assert "run_shell" not in [s.name for s in tool_specs(exclude=["run_shell"])]
    approval = {s.name for s in tool_specs() if s.needs_approval}
    assert {"run_shell", "write_file", "edit_file"} <= approval
    assert not approval & {"read_file", "list_dir", "grep"}
    (entry,) = wire_tools([TOOLS["grep"].spec.to_wire()])
    assert entry["type"] == "function" and entry["function"]["parameters"]["required"] == ["pattern"]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ('{"path": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ("{}", "missing required argument(s) path"),
        ({"path": 3}, "must be string"),
        ({"path": "f.txt", "start": "10"}, "must be integer"),
        ({"path": "f.txt", "start": True}, "must be integer"),
        ({"path": "f.txt", "lines": 5}, "no argument 'lines'"),
    ],
)
def test_bad_arguments_become_tool_errors(ws: Path, raw, words: str) -> None:
    result = run_tool("read_file", raw, make_ctx(ws))
    assert result.is_error and words in result.content


def test_argument_leniency_null_optional_and_integral_float(ws: Path) -> None:
    numbered_file(ws / "f.txt", 5)
    result = run_tool("read_file", '{"path": "f.txt", "start": 2.0, "end": null}', make_ctx(ws))
    assert result.content.splitlines() == ["line 2", "line 3", "line 4", "line 5"]
    assert parse_args(TOOLS["read_file"].spec, {"path": "x", "start": 2.0}) == {"path": "x", "start": 2}


def test_unknown_tool_is_a_tool_error(ws: Path) -> None:
    result = run_tool("rm_rf", "{}", make_ctx(ws))
    assert result.is_error and "unknown tool 'rm_rf'" in result.content and "read_file" in result.content


def test_a_raising_tool_becomes_a_tool_error(ws: Path) -> None:
    spec = ToolSpec(
        name="boom",
        description="always raises",
        parameters={"type": "object", "properties": {}, "required": []},
    )

    def boom(args, ctx):
        raise RuntimeError("kaboom")

    def wrong(args, ctx):
        return "not an outcome"

    register(spec, boom)
    try:
        result = run_tool("boom", None, make_ctx(ws))
        assert result.is_error and "RuntimeError: kaboom" in result.content
        register(spec, wrong)
        result = run_tool("boom", "", make_ctx(ws))
        assert result.is_error and "not a ToolOutcome" in result.content
    finally:
        unregister("boom")
    assert "boom" not in TOOLS


def test_registered_tools_run_like_builtins(ws: Path) -> None:
    spec = ToolSpec(
        name="echo",
        description="echo",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )
    register(spec, lambda args, ctx: ToolOutcome(content=args["text"]))
    try:
        assert run_tool("echo", '{"text": "hi"}', make_ctx(ws)).content == "hi"
        assert "echo" in [s.name for s in registry.tool_specs()]
        assert preview_tool("echo", {"text": "hi"}, make_ctx(ws)) is None
    finally:
        unregister("echo")


# ---------------------------------------------------------------- tailrent tool


def test_one_registry_holds_every_tool_a_request_offers(ws: Path) -> None:
    from tailrent_tui.commands.tool import tool

    offered = [t["name"] for t in offered_tools()]
    assert offered == list(TOOLS), "every offered tool is in the registry, in its order"
    assert offered[-5:] == ["read_spill", "search_history", "remember", "recall", "delegate"]
    assert offered_tools(sub=True) == [t for t in offered_tools() if t["name"] != "delegate"]
    # where no session is open, a session tool says so in one line, through the same door
    for name, args in [
        ("read_spill", '{"id": "abc"}'),
        ("search_history", '{"query": "TTL"}'),
        ("remember", '{"key": "k", "text": "t"}'),
        ("recall", '{"key": "k"}'),
        ("delegate", '{"task": "list the files"}'),
    ]:
        result = CliRunner().invoke(tool, [name, args, "--workspace", str(ws)])
        assert result.exit_code == 1, result.output
        assert result.output.startswith(f"error: {name} works inside a session"), result.output
        assert result.output.count("\n") == 1
    # the arguments are checked first, as for every tool
    wrong = CliRunner().invoke(tool, ["read_spill", '{"id": 3}', "--workspace", str(ws)])
    assert wrong.exit_code == 1 and "argument 'id' of read_spill must be string" in wrong.output


@pytest.fixture
def own_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Settings from an empty config dir and no TAILRENT_* variables, whatever the machine has."""
    for var in list(os.environ):
        if var.startswith("TAILRENT_"):
            monkeypatch.delenv(var)
    config = tmp_path / "config"
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(config))
    return config


def test_tool_command_prints_what_the_model_receives(ws: Path, own_config: Path) -> None:
    from tailrent_tui.commands.tool import tool

    (ws / "b.txt").write_text("")
    (ws / "a").mkdir()
    result = CliRunner().invoke(tool, ["list_dir", "{}", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    assert result.output == run_tool("list_dir", {}, make_ctx(ws)).content + "\n"


def test_tool_command_json_and_error_exit(ws: Path, own_config: Path) -> None:
    from tailrent_tui.commands.tool import tool

    numbered_file(ws / "f.txt", 3)
    ok = CliRunner().invoke(tool, ["read_file", '{"path": "f.txt", "end": 2}', "--workspace", str(ws), "--json"])
    assert ok.exit_code == 0
    data = json.loads(ok.output)
    assert data["tool"] == "read_file" and data["content"] == "line 1\nline 2"
    assert data["is_error"] is False and data["cut"] is None and data["binary"] is False
    assert data["meta"]["lines"] == 3

    bad = CliRunner().invoke(tool, ["read_file", '{"path": "../x"}', "--workspace", str(ws)])
    assert bad.exit_code == 1
    assert bad.output.startswith("error: refused path '../x'")

    broken = CliRunner().invoke(tool, ["grep", "{not json", "--workspace", str(ws), "--json"])
    assert broken.exit_code == 1
    assert json.loads(broken.output)["is_error"] is True


def test_tool_command_through_the_tailrent_group(ws: Path, own_config: Path) -> None:
    from tailrent_tui.cli import cli

    (ws / "hello.txt").write_text("hello\n")
    result = CliRunner().invoke(cli, ["--workspace", str(ws), "tool", "grep", '{"pattern": "hel+o"}'], obj={})
    assert result.exit_code == 0, result.output
    assert result.output == "hello.txt:1: hello\n"


def test_tool_command_defaults_to_the_current_directory(ws: Path, own_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tailrent_tui.commands.tool import tool

    (ws / "here.txt").write_text("")
    monkeypatch.chdir(ws)
    result = CliRunner().invoke(tool, ["list_dir"])
    assert result.output == "here.txt\n"


def test_tool_command_applies_rung_2_with_the_configured_threshold(
    ws: Path, own_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tailrent_tui.commands.tool import tool

    numbered_file(ws / "big.txt", 400)
    for i in range(5):
        (ws / f"f{i}.txt").write_text("")
    monkeypatch.setenv("TAILRENT_TOOLS_SPILL_THRESHOLD", "50")
    rung1 = run_tool("read_file", {"path": "big.txt"}, make_ctx(ws))
    spilled = CliRunner().invoke(tool, ["read_file", '{"path": "big.txt"}', "--workspace", str(ws), "--json"])
    assert spilled.exit_code == 0, spilled.output
    data = json.loads(spilled.output)
    assert data["content"].startswith("[spill ") and "read_spill" in data["content"]
    assert len(data["content"]) < len(rung1.content) / 4


def test_tool_command_bad_setting_is_a_clear_error(ws: Path, own_config: Path, monkeypatch) -> None:
    from tailrent_tui.commands.tool import tool

    monkeypatch.setenv("TAILRENT_TOOLS_SPILL_THRESHOLD", "lots")
    result = CliRunner().invoke(tool, ["list_dir", "{}", "--workspace", str(ws)])
    assert result.exit_code != 0 and "tools.spill_threshold" in result.output
