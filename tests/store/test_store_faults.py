"""Hostile cases for the store (issue 13): a full disk under `ask`, the rescue file,
a kill inside `sessions repair --apply`, and the temp files kills leave behind.

A full disk is real here: the child runs under RLIMIT_FSIZE with SIGXFSZ
ignored, so every write past the limit fails with EFBIG the way ENOSPC does.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tailrent_tui.core.messages import MessageAdded
from tailrent_tui.store.journal import load_journal
from tailrent_tui.store.paths import write_file_atomic
from tailrent_tui.store.sessions import SessionDir, close_session, open_session

ROOT = Path(__file__).resolve().parents[2]
TAILRENT = [sys.executable, "-m", "tailrent_tui"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "TAILRENT_HOME": str(tmp_path / "data"),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TMPDIR": str(tmp_path / "tmp"),
        "TAILRENT_FSYNC": "false",
        "PYTHONPATH": str(ROOT),
    }
    for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "TAILRENT_YOLO", "OLLAMA_HOST"):
        env.pop(var, None)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    (tmp_path / "ws").mkdir(exist_ok=True)
    return env


def _limited(limit: int):
    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def _ask(tmp_path: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TAILRENT, "--workspace", str(tmp_path / "ws"), "ask", "--model", "mock", *args],
        # under the file-size limit Python would write bytecode caches cut short into the tree
        # (seen: "marshal data too short" at the next import, in every later test)
        env={**_env(tmp_path), **({"PYTHONDONTWRITEBYTECODE": "1"} if limit else {})},
        preexec_fn=_limited(limit) if limit else None,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _messages(journal: Path) -> list[str]:
    return [e.message.content for e in load_journal(journal).events if isinstance(e, MessageAdded)]


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    """The rescue fallback (the user's state dir) inside tmp."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


PROMPT = "DECISION: keep refresh tokens in redis because the TTL is 30 days. Where do they live?"


# -- C1: ask on a full disk --------------------------------------------------------


@pytest.mark.fault("C1 ask on a full disk")
def test_ask_never_promises_a_restore_when_the_rescue_file_could_not_be_written_either(tmp_path):
    """A prompt bigger than what the disk takes: neither the journal nor a rescue file holds the
    turn, and the error says so instead of promising that the next open restores it."""
    big = PROMPT + " " + "x" * 3000
    r = _ask(tmp_path, "--json", big, limit=1000)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0
    out = json.loads(r.stdout)
    assert out["saved"] is False
    assert "no rescue file could be written" in out["error"]["message"]
    assert "restores it" not in out["error"]["hint"] and "could not be kept anywhere" in out["error"]["hint"]


@pytest.mark.fault("C1 ask on a full disk")
# at 1,000 bytes the ledger's event leaves no room for a rescue file either (the case above)
@pytest.mark.parametrize("limit", [1150, 1300, 1500])
@pytest.mark.parametrize("as_json", [True, False])
def test_ask_on_a_full_disk_reports_the_unsaved_turn_and_the_next_open_restores_it(tmp_path, limit, as_json):
    r = _ask(tmp_path, *(["--json"] if as_json else []), PROMPT, limit=limit)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode != 0, "a turn the journal lacks was reported as a success"
    error_lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1, r.stderr
    assert "could not be saved" in error_lines[0] and "Your message is kept" not in r.stderr
    if as_json:
        out = json.loads(r.stdout)
        assert out["error"] and "could not be saved" in out["error"]["message"]
        assert out["saved"] is False
        assert out["reply"], "the reply is still shown"
    else:
        assert "(mock)" in r.stdout, "the reply is still shown"
    (sd_path,) = (tmp_path / "data" / "sessions").iterdir()
    rescue = list((tmp_path / "data" / "rescue").iterdir())
    assert len(rescue) == 1 and str(rescue[0]) in error_lines[0]
    assert stat.S_IMODE(rescue[0].stat().st_mode) == 0o600
    rescued = rescue[0].read_bytes().count(b"\n")
    assert rescued >= 1 and f"{rescued} change(s)" in error_lines[0]

    # room again: the next open of the session appends the rescued lines, in order
    again = _ask(tmp_path, "--continue", "And their TTL?")
    assert again.returncode == 0, again.stderr
    contents = _messages(sd_path / "journal.jsonl")
    assert contents[0] == PROMPT and contents[1].startswith("(mock)") and contents[2] == "And their TTL?"
    assert not list((tmp_path / "data" / "rescue").iterdir())


META_FAILS = textwrap.dedent(
    """
    import errno, sys
    from tailrent_tui.cli import cli
    from tailrent_tui.store import sessions

    real = sessions.SessionDir.write_meta
    def write_meta(self, meta):
        if meta.summary is not None:  # the update after the turn, only
            raise {exc}
        real(self, meta)
    sessions.SessionDir.write_meta = write_meta
    cli(args=sys.argv[1:], obj={})
    """
)


@pytest.mark.fault("C1 ask on a full disk")
@pytest.mark.parametrize(
    "exc", ["OSError(errno.ENOSPC, 'No space left on device')", "OSError(errno.EROFS, 'Read-only file system')"]
)
def test_ask_says_when_meta_cannot_be_updated_after_a_saved_turn(tmp_path, exc):
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            META_FAILS.replace("{exc}", exc),
            "--workspace",
            str(tmp_path / "ws"),
            "ask",
            "--model",
            "mock",
            PROMPT,
        ],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr
    assert r.returncode == 0, r.stderr  # the turn is in the journal
    assert "(mock)" in r.stdout
    warning = [line for line in r.stderr.splitlines() if "meta.json" in line]
    assert len(warning) == 1 and "every change is saved" in warning[0], r.stderr


@pytest.mark.fault("C1 ask on a full disk")
def test_close_session_never_skips_the_meta_update_silently(tmp_path):
    sd = SessionDir.create(tmp_path / "data", tokenizer="chars4", session_id="s1")
    meta_before = sd.meta_path.read_bytes()
    opened = open_session(sd, fsync=False)
    session = opened.session
    session.add("user", "saved")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (sd.journal_path.stat().st_size + 200, hard))
        session.add("user", "not saved " * 30)
        report = close_session(opened)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert not report.saved and report.pending == 1
    assert report.meta_error and "meta.json" in report.meta_error
    assert "could not be saved" in (report.message() or "")
    assert json.loads(sd.meta_path.read_bytes()).get("summary") is None or sd.meta_path.read_bytes() == meta_before
    assert report.rescue is not None and report.rescue.lines == 1


@pytest.mark.fault("C1 ask on a full disk")
@pytest.mark.parametrize("fsync", [False, True])
def test_a_journal_that_does_not_close_cleanly_is_said(tmp_path, fsync):
    sd = SessionDir.create(tmp_path / "data", tokenizer="chars4", session_id="s1")
    opened = open_session(sd, fsync=fsync)
    opened.session.add("user", "saved")
    fd = opened.writer._fd
    assert fd is not None
    os.close(fd)  # closed behind the writer's back: its own close fails (EBADF), as NFS can fail a close
    report = close_session(opened)
    line = report.message() or ""
    assert report.saved and "closing journal.jsonl failed" in line
    if fsync:
        assert "every line was fsynced before it" in line
    else:
        assert "fsync is off, so the last lines may not be on disk" in line
    assert "saved" in sd.journal_path.read_text()


TURN_FAILS = textwrap.dedent(
    """
    import sys
    from tailrent_tui.agent.ladder_driver import LadderDriver
    from tailrent_tui.cli import cli

    async def before_request(self, cb=None):
        raise RuntimeError("the fold archive's index is corrupt")
    LadderDriver.before_request = before_request
    cli(args=sys.argv[1:], obj={})
    """
)
# a user message whose journal line fits in a rescue file under 680 bytes, not in the journal after its header
# the journal takes the first events (session meta, the message), not the ledger's and the fold's
LIMIT_BUG = 900
LONG_PROMPT = "DECISION: keep refresh tokens in redis because the TTL is 30 days. " + "Where do they live? " * 9


@pytest.fixture
def short_tmp():
    """A tmp dir whose path has the same short length wherever the suite runs. The file size
    limit below must let meta.json (which holds the workspace's path) be written: under
    pytest's own tmp_path, longer with every run number and under xdist, it was not, and a
    note saying so made a second pending change, too big for the rescue file."""
    path = Path(tempfile.mkdtemp(prefix="tr", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.fault("C1 ask on a full disk")
@pytest.mark.parametrize(("limit", "as_json"), [(LIMIT_BUG, False), (LIMIT_BUG, True), (None, False)])
def test_a_turn_that_fails_on_a_bug_still_says_where_the_turn_went(short_tmp, limit, as_json):
    """Not a model error (the ladder raises before the request): one error line, no traceback, exit 1,
    and the close report naming the rescue file when the disk is full too."""
    tmp_path = short_tmp
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            TURN_FAILS,
            "--workspace",
            str(tmp_path / "ws"),
            "ask",
            "--model",
            "mock",
            *(["--json"] if as_json else []),
            LONG_PROMPT,
        ],
        # under the file-size limit Python would write bytecode caches cut short into the tree
        # (seen: "marshal data too short" at the next import, in every later test)
        env={**_env(tmp_path), **({"PYTHONDONTWRITEBYTECODE": "1"} if limit else {})},
        preexec_fn=_limited(limit) if limit else None,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stderr
    error_lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "the turn failed: RuntimeError: the fold archive's index is corrupt" in error_lines[0]
    (sd_path,) = (tmp_path / "data" / "sessions").iterdir()
    if limit is None:
        assert f"Your message is kept in session {sd_path.name}" in r.stderr
        assert _messages(sd_path / "journal.jsonl") == [LONG_PROMPT]
        return
    (rescue,) = list((tmp_path / "data" / "rescue").iterdir())
    assert str(rescue) in error_lines[0] and "1 change(s) could not be saved" in error_lines[0]
    assert "Your message is kept" not in r.stderr
    if as_json:
        out = json.loads(r.stdout)
        assert out["saved"] is False and out["reply"] is None and str(rescue) in out["error"]["message"]
    # room again, and no bug: the next open appends the rescued message, then the turn goes on
    again = _ask(tmp_path, "--continue", "And their TTL?")
    assert again.returncode == 0, again.stderr
    assert _messages(sd_path / "journal.jsonl")[:1] == [LONG_PROMPT] and not list((tmp_path / "data" / "rescue").iterdir())


# -- the rescue file -----------------------------------------------------------------

APP_RESCUE = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    from tailrent_tui.agent.lifecycle import open_agent
    from tailrent_tui.settings import Settings

    settings = Settings(model="mock", data_dir=sys.argv[1], workspace=sys.argv[2], tokenizer="chars4")

    async def main():
        async with open_agent(settings, {}, new=True) as agent:  # the app's journal, its close
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            # room for a rescue file of the line below, not for the journal with it
            for n in range(10):
                agent.session.add("user", f"saved {n} " + "y" * 500)
            await agent.journal.drain()
            limit = agent.journal.path.stat().st_size + 1000  # the line below is about 3,000 bytes
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            agent.session.add("user", "DECISION: " + "x" * 2500)

    asyncio.run(main())
    """
)


@pytest.mark.fault("rescue file")
@pytest.mark.parametrize("plant", ["nothing", "symlink in the temp dir", "symlink as the rescue dir"])
def test_the_apps_rescue_file_is_private_and_inside_the_data_dir(tmp_path, plant):
    env = _env(tmp_path)
    data = tmp_path / "data"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    tmp = Path(env["TMPDIR"])
    if plant == "symlink in the temp dir":
        # the old rescue name, for any session id: the app must not write there at all
        for n in range(3):
            (tmp / f"tailrent-unsaved-{n}.jsonl").symlink_to(victim)
    elif plant == "symlink as the rescue dir":
        data.mkdir()
        (data / "rescue").symlink_to(tmp)
    r = subprocess.run(
        [sys.executable, "-c", APP_RESCUE, str(data), str(tmp_path / "ws")], env=env, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert victim.read_text() == "keep me"
    written = [p for p in tmp.rglob("*") if not p.is_symlink()]
    assert not written, f"a rescue file in the temp dir: {written}"
    lines = [line for line in r.stderr.splitlines() if "could not be saved" in line]
    assert len(lines) == 1, r.stderr
    expected_dir = tmp_path / "state" / "tailrent" / "rescue" if plant == "symlink as the rescue dir" else data / "rescue"
    (rescue,) = list(expected_dir.iterdir())
    assert str(rescue) in lines[0]
    assert stat.S_IMODE(rescue.stat().st_mode) == 0o600
    assert stat.S_IMODE(expected_dir.stat().st_mode) == 0o700
    assert b"DECISION: xxx" in rescue.read_bytes()


@pytest.mark.fault("rescue file")
@pytest.mark.parametrize("planted", ["symlink to a file", "dangling symlink", "regular file"])
def test_a_rescue_file_never_follows_or_overwrites_what_is_planted(tmp_path, planted):
    from tailrent_tui.store.rescue import write_rescue_file

    directory = tmp_path / "rescue"
    directory.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = directory / "unsaved-x.jsonl"
    if planted == "symlink to a file":
        target.symlink_to(victim)
    elif planted == "dangling symlink":
        target.symlink_to(tmp_path / "created-through-the-link")
    else:
        target.write_text("earlier rescue")
    with pytest.raises(OSError):  # noqa: PT011  (refused is what counts, whichever errno the kernel picks)
        write_rescue_file(directory, "unsaved-x.jsonl", b"{}\n")
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "created-through-the-link").exists()
    if planted == "regular file":
        assert target.read_text() == "earlier rescue"


@pytest.mark.fault("rescue file")
def test_rescue_falls_back_to_the_state_dir_and_says_when_both_fail(tmp_path):
    from tailrent_tui.store.rescue import rescue_unsaved

    data = tmp_path / "data"
    data.mkdir()
    (data / "rescue").write_text("not a directory")
    out = rescue_unsaved("s1", [b'{"a":1}\n'], data, fallback=tmp_path / "state" / "rescue")
    assert out.path is not None and out.path.parent == tmp_path / "state" / "rescue"
    (tmp_path / "blocked").write_text("")
    out = rescue_unsaved("s1", [b'{"a":1}\n'], data, fallback=tmp_path / "blocked" / "rescue")
    assert out.path is None and len(out.errors) == 2


# -- sessions repair --apply, killed at each step -------------------------------------

REPAIR_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from tailrent_tui.store.repair import repair_session
    from tailrent_tui.store.sessions import SessionDir

    step, calls = int(sys.argv[2]), [0]
    def killing(real):
        def call(*args, **kw):
            calls[0] += 1
            if calls[0] == step:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kw)
        return call
    for name in ("rename", "replace", "link", "unlink"):
        setattr(os, name, killing(getattr(os, name)))
    repair_session(SessionDir(sys.argv[1]), apply=True)
    print("done", calls[0])
    """
)


def _damaged_session(tmp_path: Path) -> SessionDir:
    sd = SessionDir.create(tmp_path / "data", tokenizer="chars4", session_id="dmg")
    opened = open_session(sd, fsync=False)
    session = opened.session
    for i in range(5):
        session.add("user", f"message {i}")
    close_session(opened)
    lines = sd.journal_path.read_bytes().splitlines(keepends=True)
    lines.insert(3, b"not json at all\n")
    sd.journal_path.write_bytes(b"".join(lines))
    return sd


@pytest.mark.fault("repair --apply crash")
@pytest.mark.parametrize("step", [1, 2, 3, 4, 5])
def test_a_kill_inside_repair_apply_always_leaves_a_journal(tmp_path, step):
    sd = _damaged_session(tmp_path)
    r = subprocess.run(
        [sys.executable, "-c", REPAIR_KILLED, str(sd.path), str(step)],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode in (0, -signal.SIGKILL), r.stderr
    assert sd.journal_path.exists(), f"killed at step {step}: no journal left"
    raw = sd.journal_path.read_bytes()
    if b"not json" in raw:
        # the original, untouched: the repair can simply run again
        assert list(sd.journal_path.read_bytes().splitlines())[3] == b"not json at all"
    else:
        assert _messages(sd.journal_path) == [f"message {i}" for i in range(5)]
        backups = list(sd.path.glob("journal.bak-*.jsonl"))
        assert len(backups) == 1 and b"not json" in backups[0].read_bytes()


# -- temp files left by kills -----------------------------------------------------------


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.fault("stale temp files")
@pytest.mark.parametrize("where", ["", "spill", "archive", "memory"])
def test_stale_temp_files_are_cleaned_on_the_next_open_and_nothing_else(tmp_path, where):
    sd = SessionDir.create(tmp_path / "data", tokenizer="chars4", session_id="tmpfiles")
    d = sd.path / where
    d.mkdir(exist_ok=True)
    dead = d / f".meta.json.{_dead_pid()}.0123abcd.tailrent-tmp"
    live = d / f".meta.json.{os.getppid()}.0123abcd.tailrent-tmp"  # a running process is writing it
    old_style = d / ".fold-0001.json.89abcdef.tmp"
    young_old_style = d / ".fold-0002.json.89abcdef.tmp"
    reused_pid = d / f".x.json.{os.getppid()}.11112222.tailrent-tmp"
    not_ours = [d / "notes.tmp", d / ".hidden.tailrent-tmp", d / "123.json"]
    for p in [dead, live, old_style, young_old_style, reused_pid, *not_ours]:
        p.write_text("partial")
    hours_ago = time.time() - 2 * 3600
    os.utime(old_style, (hours_ago, hours_ago))
    days_ago = time.time() - 3 * 86400
    os.utime(reused_pid, (days_ago, days_ago))
    opened = open_session(sd, fsync=False)
    close_session(opened)
    assert not dead.exists() and not old_style.exists() and not reused_pid.exists()
    assert live.exists() and young_old_style.exists()
    assert all(p.exists() for p in not_ours)


@pytest.mark.fault("stale temp files")
def test_store_temp_files_name_their_writer(tmp_path):
    from tailrent_tui.store.paths import clean_stale_temp_files, temp_name

    name = temp_name("meta.json")
    assert f".{os.getpid()}." in name and name.endswith(".tailrent-tmp")
    write_file_atomic(tmp_path / "a.json", b"{}")
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
    assert clean_stale_temp_files(tmp_path) == []
