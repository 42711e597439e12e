"""Session directories: permissions, lock, resume, listing, spills, archive, memory, export, inspect."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from folds import fold_span

from tailrent_tui.cli import cli
from tailrent_tui.core.messages import UsageRecorded
from tailrent_tui.core.rungs.fold import FoldAborted, oldest_unpinned
from tailrent_tui.core.rungs.spill import admit_tool_result
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.store.archive import FileFoldArchive
from tailrent_tui.store.memory import MemoryEntryMissing
from tailrent_tui.store.outside import read_outside
from tailrent_tui.store.paths import ENV_HOME, resolve_data_dir
from tailrent_tui.store.sessions import (
    SessionDir,
    SessionLookupError,
    close_session,
    find_session,
    last_request_at,
    list_sessions,
    open_session,
    resolve_session,
)
from tailrent_tui.store.spills import SpillAltered, SpillMissing

ROOT = Path(__file__).resolve().parents[1]


def make(data: Path, sid: str, *, title: str = "", n: int = 3, now: float = 1_800_000_000.0) -> SessionDir:
    sd = SessionDir.create(data, title=title, tokenizer="chars4", session_id=sid, now=now)
    opened = open_session(sd, fsync=False)
    s = opened.session
    for i in range(n):
        s.add("user", f"{title} message {i}", at=now + i)
    close_session(opened)
    return sd


def test_data_dir_precedence(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_HOME, str(tmp_path / "env"))
    assert resolve_data_dir(None) == tmp_path / "env"
    assert resolve_data_dir(tmp_path / "flag") == tmp_path / "flag"
    monkeypatch.delenv(ENV_HOME)
    assert resolve_data_dir(None).name == "tailrent"


def test_directories_are_0700_and_files_0600(tmp_path: Path) -> None:
    os.umask(0o022)
    sd = make(tmp_path, "perm", n=2)
    opened = open_session(sd)
    s = opened.session
    admit_tool_result(s, "grep", "hit\n" * 400, sd.spills(), threshold=10)
    fold_span(s, oldest_unpinned(s, 2), summarizer=LossySummarizer(), guard="off", archive=sd.archive())
    sd.memory().remember("plan", "ship friday")
    close_session(opened)
    for p in [sd.path, *sd.path.rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), f"{p}: {oct(mode)}"


def test_second_process_is_refused_naming_the_first(tmp_path: Path) -> None:
    sd = make(tmp_path, "locked")
    opened = open_session(sd)
    code = (
        "import sys\n"
        "from tailrent_tui.store.sessions import SessionDir, SessionLocked, open_session\n"
        "try:\n"
        f"    open_session(SessionDir({str(sd.path)!r}))\n"
        "except SessionLocked as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 3, r.stderr
    assert f"process {os.getpid()} on " in r.stdout
    close_session(opened)
    # once closed, another process may open it
    r2 = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r2.returncode == 0, r2.stdout + r2.stderr


def test_stale_lock_of_a_dead_process_is_taken_over_and_said(tmp_path: Path) -> None:
    sd = make(tmp_path, "stale")
    code = (
        "import os\n"
        "from tailrent_tui.store.sessions import SessionDir\n"
        f"SessionDir({str(sd.path)!r}).acquire_lock()\n"
        "print(os.getpid())\n"
        "os._exit(0)\n"  # dies holding the lock: the kernel drops the flock, the file keeps its pid
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    dead_pid = int(r.stdout.strip())
    assert json.loads(sd.lock_path.read_text())["pid"] == dead_pid
    opened = open_session(sd)
    assert any(f"process {dead_pid}" in m and "took over" in m for m in opened.warnings)
    close_session(opened)


def test_resume_by_prefix_continue_and_clear_errors(tmp_path: Path) -> None:
    make(tmp_path, "alpha-1", now=1_800_000_000.0)
    make(tmp_path, "alpha-2", now=1_800_000_100.0)
    beta = make(tmp_path, "beta-1", now=1_800_000_050.0)
    assert find_session(tmp_path, "beta").id == "beta-1"
    with pytest.raises(SessionLookupError, match=r"ambiguous.*alpha-1.*alpha-2"):
        find_session(tmp_path, "alpha")
    with pytest.raises(SessionLookupError, match="no session 'zeta'"):
        find_session(tmp_path, "zeta")
    opened = open_session(beta)  # opening makes it the last active one
    s = opened.session
    s.add("user", "good morning")
    close_session(opened)
    assert resolve_session(tmp_path, continue_=True).id == "beta-1"
    assert resolve_session(tmp_path, resume="alpha-2").id == "alpha-2"
    assert resolve_session(tmp_path) is None
    with pytest.raises(SessionLookupError, match="no session to continue"):
        resolve_session(tmp_path / "empty", continue_=True)


def test_sessions_command_lists_counts(tmp_path: Path) -> None:
    sd = make(tmp_path, "listme", title="déjà vu", n=5)
    opened = open_session(sd)
    s = opened.session
    s.pin(s.messages[0].id)
    fold_span(s, oldest_unpinned(s, 2), summarizer=LossySummarizer(), guard="off", archive=sd.archive())
    expected = (len(s.messages), len(s.folds), len(s.pinned), s.context_tokens)
    close_session(opened)
    runner = CliRunner()
    r = runner.invoke(cli, ["--data-dir", str(tmp_path), "sessions", "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)
    assert (row["id"], row["title"]) == ("listme", "déjà vu")
    assert (row["messages"], row["folds"], row["pinned"], row["context_tokens"]) == expected
    # the same counts without the meta cache (the journal grew behind its back)
    with open(sd.journal_path, "ab") as f:
        f.write(b'{"type": "note", "text": "appended elsewhere", "level": "info", "at": 1.0}\n')
    (fresh,) = list_sessions(tmp_path)
    assert (fresh.messages, fresh.folds, fresh.pinned, fresh.context_tokens) == expected
    table = runner.invoke(cli, ["--data-dir", str(tmp_path), "sessions"])
    assert "listme" in table.output and "déjà vu" in table.output


def test_missing_and_altered_spill_files_give_clear_messages(tmp_path: Path) -> None:
    sd = make(tmp_path, "spilly", n=0)
    opened = open_session(sd)
    s = opened.session
    m1 = admit_tool_result(s, "grep", "alpha\n" * 500, sd.spills(), threshold=10)
    m2 = admit_tool_result(s, "read_file", "beta\n" * 500, sd.spills(), threshold=10)
    close_session(opened)
    store = sd.spills()
    assert store.read_spill(m1.spill_id) == "alpha\n" * 500
    store.path_for(m1.spill_id).unlink()
    with pytest.raises(SpillMissing, match=f"spill {m1.spill_id}.*missing"):
        store.read_spill(m1.spill_id)
    p2 = store.path_for(m2.spill_id)
    p2.write_text(p2.read_text().replace("beta", "gamma", 1))
    with pytest.raises(SpillAltered, match="altered"):
        store.read_spill(m2.spill_id)
    p2.write_bytes(b"{not json")
    with pytest.raises(SpillAltered):
        store.read_spill(m2.spill_id)
    # the session itself still opens: pointers stay in the transcript
    reopened = open_session(sd)
    s2 = reopened.session
    assert [m.spill_id for m in s2.messages] == [m1.spill_id, m2.spill_id]
    close_session(reopened)


def test_fold_does_not_happen_when_the_archive_cannot_be_written(tmp_path: Path) -> None:
    sd = make(tmp_path, "arch", n=4)
    opened = open_session(sd)
    s = opened.session
    before = [m.id for m in s.messages]

    class FullArchive(FileFoldArchive):
        def write_fold(self, *a, **k):
            raise OSError(28, "No space left on device")

    with pytest.raises(FoldAborted):
        fold_span(s, oldest_unpinned(s, 2), summarizer=LossySummarizer(), guard="off", archive=FullArchive(sd.path / "archive"))
    assert [m.id for m in s.messages] == before and s.folds == []
    close_session(opened)


def test_archive_search_history_and_inspect(tmp_path: Path) -> None:
    sd = make(tmp_path, "insp", n=0)
    opened = open_session(sd)
    s = opened.session
    s.add("user", "We chose Redis with a 15 minute TTL because the DB was slow.")
    s.add("assistant", "Noted. Next step: the login page.")
    s.add("user", "ok")
    originals = [m.model_dump(mode="json") for m in s.messages[:2]]
    fold_span(s, oldest_unpinned(s, 2), summarizer=LossySummarizer(words=3), guard="off", archive=sd.archive())
    close_session(opened)
    (hit,) = read_outside(s, sd.archive(), sd.spills(), sd.memory()).search("15 MINUTE")
    assert hit.startswith(f"fold #1 · user {originals[0]['id']}: ") and "15 minute TTL" in hit

    runner = CliRunner()
    r = runner.invoke(cli, ["--data-dir", str(tmp_path), "inspect", "insp", "--fold", "1", "--json"])
    assert r.exit_code == 0, r.output
    view = json.loads(r.output)
    assert view["originals"] == originals
    assert view["depth"] == 1 and view["tokens_before"] == sum(o["tokens"] for o in originals)
    text = runner.invoke(cli, ["--data-dir", str(tmp_path), "inspect", "insp"])
    assert "15 minute TTL" in text.output and "fold #1" in text.output
    bad = runner.invoke(cli, ["--data-dir", str(tmp_path), "inspect", "insp", "--fold", "7"])
    assert bad.exit_code != 0 and "no fold #7" in bad.output and "folds 1-1" in bad.output


def test_memory_entries(tmp_path: Path) -> None:
    mem = make(tmp_path, "mem", n=0).memory()
    mem.remember("db-choice", "Redis, 15 min TTL — décidé")
    assert mem.recall("db-choice") == "Redis, 15 min TTL — décidé"
    assert mem.keys() == ["db-choice"]
    with pytest.raises(MemoryEntryMissing, match="db-choice"):
        mem.recall("nope")
    for bad in ("../etc", "a/b", "", ".hidden"):
        with pytest.raises(ValueError, match="invalid memory key"):
            mem.remember(bad, "x")


def test_the_last_request_is_replayed_from_the_journal(tmp_path: Path) -> None:
    sd = make(tmp_path, "idle", n=1)
    assert last_request_at(open_session(sd, lock=False).session) is None
    opened = open_session(sd)
    opened.session.emit(UsageRecorded(request_no=1, context_tokens=100, at=1_800_000_000.0))
    close_session(opened)
    assert last_request_at(open_session(sd, lock=False).session) == 1_800_000_000.0


def _build_export_session(data: Path) -> SessionDir:
    sd = make(data, "exp", title="Ünïcode ✓", n=0)
    opened = open_session(sd)
    s = opened.session
    a = s.add("user", "Bonjour — we pick Redis, 15 minutes. 日本語")
    s.add("assistant", "D'accord ✓")
    s.pin(a.id)
    admit_tool_result(s, "grep", "résultat\n" * 300, sd.spills(), threshold=10)
    s.add("user", "next")
    s.add("user", "and next")
    fold_span(s, oldest_unpinned(s, 2), summarizer=LossySummarizer(), guard="off", archive=sd.archive())
    close_session(opened)
    return sd


def test_export_md_and_json_are_utf8_under_a_c_locale(tmp_path: Path) -> None:
    home = tmp_path / "home"  # export refuses to write into the data dir
    _build_export_session(home)
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii", "PYTHONUTF8": "0", "PYTHONPATH": str(ROOT)}
    out_md = tmp_path / "out.md"
    for args in (["--format", "md", "-o", str(out_md)], ["--format", "json"]):
        r = subprocess.run(
            [sys.executable, "-m", "tailrent_tui", "--data-dir", str(home), "export", "exp", *args],
            capture_output=True,
            env=env,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    md = out_md.read_bytes().decode("utf-8")
    doc = json.loads(r.stdout.decode("utf-8"))
    assert "日本語" in md and "Ünïcode ✓" in md
    assert "📌" in md  # the pinned decision
    assert "## Fold log" in md and "| 1 |" in md
    assert "[spill " in md
    entries = doc["transcript"]
    kinds = [e["entry"] for e in entries]
    assert kinds.index("pin") < kinds.index("fold")
    first = entries[0]
    assert first["content"] == "Bonjour — we pick Redis, 15 minutes. 日本語" and first["pinned"] is True
    # the originals a fold later removed are still in the export, in order, before the fold
    fold = next(e for e in entries if e["entry"] == "fold")
    folded_positions = [i for i, e in enumerate(entries) if e.get("id") in fold["span_ids"] and e["entry"] == "message"]
    assert len(folded_positions) == 2 and max(folded_positions) < entries.index(fold)
    assert doc["fold_log"][0]["depth"] == 1


def test_repair_command_writes_copy_and_apply_swaps_it_in(tmp_path: Path) -> None:
    sd = make(tmp_path, "rep", n=4)
    lines = sd.journal_path.read_bytes().split(b"\n")
    lines[2] = b"\x00\x01garbage"
    sd.journal_path.write_bytes(b"\n".join(lines))
    original = sd.journal_path.read_bytes()
    runner = CliRunner()
    r = runner.invoke(cli, ["--data-dir", str(tmp_path), "sessions", "repair", "rep"])
    assert r.exit_code == 0, r.output
    assert "line 3" in r.output and "journal.repaired.jsonl" in r.output and "--apply" in r.output
    assert sd.journal_path.read_bytes() == original
    r = runner.invoke(cli, ["--data-dir", str(tmp_path), "sessions", "repair", "rep", "--apply"])
    assert r.exit_code == 0, r.output
    (backup,) = sd.path.glob("journal.bak-*.jsonl")
    assert backup.read_bytes() == original
    opened = open_session(sd)
    s = opened.session
    assert len(s.messages) == 3
    close_session(opened)
