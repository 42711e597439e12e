"""Every command survives every damaged file of a session (issue 27, item 5).

A session with messages, a fold (its archive) and a spill is damaged one file at
a time, then opened through every entry point: `sessions` (table and --json),
`export` (md, json), `inspect`, `recall`, `ask --resume`, `ask --continue`, and the
app's own open (`build_agent` with resume, what `tailrent --resume ID` runs). Each
either works or says in one line what is wrong and what to do; none prints a
traceback; `sessions` lists the session whenever its journal can be read.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tailrent_tui.agent.build import BuildError, build_agent
from tailrent_tui.cli import cli
from tailrent_tui.settings import Settings
from tailrent_tui.store.sessions import session_dirs


def _make_session(data: Path, ws: Path) -> str:
    settings = Settings(model="mock", data_dir=str(data), workspace=str(ws), tokenizer="chars4", fsync=False)
    agent = build_agent(settings, {}, async_writer=False, new=True)
    try:
        for i in range(4):
            asyncio.run(agent.turn(f"Message {i}: the refresh token lives in redis, TTL 15 minutes. " + "pad " * 50))
        asyncio.run(agent.ladder.fold(trigger="manual"))
        agent.ladder.spill([m for m in agent.session.messages if m.role == "user"][-1].id)
    finally:
        asyncio.run(agent.model.aclose())
        asyncio.run(agent.aclose())
    (sd,) = session_dirs(data)
    return sd.id


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("pristine")
    (root / "ws").mkdir()
    sid = _make_session(root / "data", root / "ws")
    other = _make_session(root / "data2", root / "ws")
    shutil.copy(root / "data2" / "sessions" / other / "meta.json", root / "other-meta.json")
    return root, sid


def _files(sd: Path, pattern: str) -> list[Path]:
    return sorted(p for p in sd.glob(pattern) if p.is_file())


def _slot_record(sd: Path, size: int) -> str:
    """Record a saved KV slot in meta.json, as a llama.cpp session keeps one; its file's name."""
    name = f"tailrent-{sd.name}-0123456789abcdef.bin"
    meta = json.loads((sd / "meta.json").read_text())
    meta["slots"] = [
        {"file": name, "hash": "0123456789abcdef", "messages": 3, "model": "gemma", "tokens": 40, "bytes": size, "saved_at": 1.0}
    ]
    (sd / "meta.json").write_text(json.dumps(meta))
    return name


def _damage(sd: Path, how: str, root: Path) -> None:
    meta, journal = sd / "meta.json", sd / "journal.jsonl"
    data_dir = sd.parent.parent
    if how == "slot file missing":
        _slot_record(sd, 1000)
    elif how == "slot file corrupt":
        (sd / "slots").mkdir(exist_ok=True)
        (sd / "slots" / _slot_record(sd, 1000)).write_bytes(b"qsgg" + b"\x00" * 10)
    elif how == "slot dir a file":
        _slot_record(sd, 1000)
        (sd / "slots").write_text("not a directory\n")
    elif how == "input history corrupt":
        (data_dir / "history").mkdir(exist_ok=True)
        for name in ("a", "b"):
            (data_dir / "history" / f"{name}.jsonl").write_bytes(b"\x00\xff{not json\n[1]\n")
    elif how == "input history a directory":
        (data_dir / "history").mkdir(exist_ok=True)
    elif how == "meta missing":
        meta.unlink()
    elif how == "meta empty":
        meta.write_bytes(b"")
    elif how == "meta truncated":
        meta.write_bytes(meta.read_bytes()[:20])
    elif how == "meta not an object":
        meta.write_text("[1, 2, 3]\n")
    elif how == "meta of another session":
        shutil.copy(root / "other-meta.json", meta)
    elif how == "meta binary":
        meta.write_bytes(b"\xff\xfe\x00garbage\x9b")
    elif how == "journal torn":
        data = journal.read_bytes()
        journal.write_bytes(data[: len(data) - 40])
    elif how == "journal empty":
        journal.write_bytes(b"")
    elif how == "journal with a NUL":
        lines = journal.read_bytes().split(b"\n")
        lines.insert(3, b"\x00" * 64)
        journal.write_bytes(b"\n".join(lines))
    elif how == "journal line of another version":
        with journal.open("ab") as f:
            f.write(b'{"type":"message_added_v9","at":1,"message":{"what":"a later tailrent"}}\n')
    elif how == "journal header of a newer version":
        lines = journal.read_bytes().split(b"\n", 1)
        header = json.loads(lines[0])
        header["version"] = 99
        journal.write_bytes(json.dumps(header).encode() + b"\n" + lines[1])
    elif how == "journal missing":
        journal.unlink()
    elif how == "journal header missing":
        journal.write_bytes(journal.read_bytes().split(b"\n", 1)[1])
    elif how == "archive missing":
        shutil.rmtree(sd / "archive")
    elif how == "archive corrupt":
        for p in _files(sd, "archive/**/*"):
            p.write_bytes(b"\x00not json")
    elif how == "spill missing":
        for p in _files(sd, "spill/**/*"):
            p.unlink()
    elif how == "spill corrupt":
        for p in _files(sd, "spill/**/*"):
            p.write_bytes(b"\xff\xfe\x00")
    elif how == "rescue file corrupt":
        rescue = sd.parent.parent / "rescue"
        rescue.mkdir(exist_ok=True)
        (rescue / f"unsaved-{sd.name}-20261201T000000-1.jsonl").write_bytes(b'\x00\xff not a line\n{"type": 1}\n')
    elif how == "rescue file a directory":
        rescue = sd.parent.parent / "rescue"
        (rescue / f"unsaved-{sd.name}-20261201T000000-2.jsonl").mkdir(parents=True)
    else:
        raise AssertionError(how)


META = ["meta missing", "meta empty", "meta truncated", "meta not an object", "meta of another session", "meta binary"]
JOURNAL = [
    "journal torn",
    "journal empty",
    "journal with a NUL",
    "journal line of another version",
    "journal header of a newer version",
    "journal missing",
    "journal header missing",
]
OTHERS = [
    "archive missing",
    "archive corrupt",
    "spill missing",
    "spill corrupt",
    "rescue file corrupt",
    "rescue file a directory",
    "slot file missing",
    "slot file corrupt",
    "slot dir a file",
    "input history corrupt",
    "input history a directory",
]
ENTRY_POINTS = [
    "sessions",
    "sessions --json",
    "export md",
    "export json",
    "inspect",
    "recall",
    "ask --resume",
    "ask --continue",
    "app --resume",
    "the app, a message sent",
]
#: round two (issue 27): damage and the entry point that were not in the first table
NEW_DAMAGE = {"slot file missing", "slot file corrupt", "slot dir a file", "input history corrupt", "input history a directory"}


def _copy(pristine: tuple[Path, str], tmp_path: Path) -> tuple[Path, Path, str]:
    root, sid = pristine
    shutil.copytree(root / "data", tmp_path / "data")
    (tmp_path / "ws").mkdir()
    return tmp_path / "data", tmp_path / "ws", sid


def _run(entry: str, data: Path, ws: Path, sid: str, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setenv("TAILRENT_HOME", str(data))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(data.parent / "config"))
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    if entry == "the app, a message sent":
        return _in_the_app(data, ws, sid)
    if entry == "app --resume":
        settings = Settings(model="mock", data_dir=str(data), workspace=str(ws), fsync=False)
        try:
            agent = build_agent(settings, {"resume": sid}, async_writer=False, new=False)
        except BuildError as exc:
            return 1, "", f"error: {exc}"
        asyncio.run(agent.model.aclose())
        asyncio.run(agent.aclose())
        return 0, agent.notice or "", ""
    args = {
        "sessions": ["sessions"],
        "sessions --json": ["sessions", "--json"],
        "export md": ["export", sid, "--format", "md"],
        "export json": ["export", sid, "--format", "json"],
        "inspect": ["inspect", sid],
        "recall": ["recall", sid, "where does the token live?", "--expect", "redis"],
        "ask --resume": ["ask", "--model", "mock", "--resume", sid, "and the TTL?"],
        "ask --continue": ["ask", "--model", "mock", "--continue", "and the TTL?"],
    }[entry]
    result = CliRunner().invoke(cli, ["--workspace", str(ws), *args], catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback: the bug this test is for
    return result.exit_code, result.stdout, result.stderr


def _in_the_app(data: Path, ws: Path, sid: str) -> tuple[int, str, str]:
    """The real app (Pilot) on the resumed session: the input's history recalled, a message sent."""
    from tailrent_tui.ui.app import TailrentApp
    from tailrent_tui.ui.widgets.input import PromptInput
    from tests.support.ui_helpers import FixedClock, wait_until

    settings = Settings(model="mock", data_dir=str(data), workspace=str(ws), fsync=False)
    try:
        agent = build_agent(settings, {"resume": sid}, async_writer=False, new=False)
    except BuildError as exc:
        return 1, "", f"error: {exc}"

    async def drive() -> str:
        app = TailrentApp(agent, agent.settings, clock=FixedClock())
        async with app.run_test(size=(140, 40)) as pilot:
            box = app.query_one(PromptInput)
            box.focus()
            await pilot.press("up")  # the history, damaged or not
            box.value = "and the TTL?"
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: not app.busy and any(m.content == "and the TTL?" for m in agent.session.messages),
                rounds=3000,
                what="the message sent",
            )
            assert app.is_running
            return " | ".join(str(n.message) for n in app._notifications)

    try:
        said = asyncio.run(drive())
    finally:
        asyncio.run(agent.model.aclose())
        asyncio.run(agent.aclose())
    return 0, said, ""


def _one_line_error(code: int, err: str) -> None:
    lines = [ln for ln in err.strip().splitlines() if ln.startswith(("error:", "Error:"))]
    assert code == 1 and lines, err
    assert "Traceback" not in err


def _cases() -> list:
    cases = []
    for how in META + JOURNAL + OTHERS:
        for entry in ENTRY_POINTS:
            new = how in NEW_DAMAGE or entry == "the app, a message sent"
            mark = pytest.mark.fault("damaged session files (new cases, round two)" if new else "damaged session files")
            cases.append(pytest.param(how, entry, marks=mark, id=f"{how}-{entry}"))
    return cases


@pytest.mark.fault("damaged session files")
@pytest.mark.parametrize(("how", "entry"), _cases())
def test_every_entry_point_survives_a_damaged_file(pristine, tmp_path, monkeypatch, how, entry):
    data, ws, sid = _copy(pristine, tmp_path)
    _damage(data / "sessions" / sid, how, pristine[0])
    code, out, err = _run(entry, data, ws, sid, monkeypatch)
    assert "Traceback" not in out + err
    if code != 0:
        _one_line_error(code, err)
        assert any(w in err for w in ("tailrent sessions repair", "upgrade tailrent", "start a new session")), err
    listed_ok = how not in ("journal missing", "journal header missing", "journal header of a newer version", "journal empty")
    if entry == "sessions --json" and listed_ok:
        rows = json.loads(out)
        assert [r["id"] for r in rows] == [sid], "the session is listed"
        if how in META:
            assert rows[0]["note"] and "repair" in rows[0]["note"], "with a note that says so"
    if entry == "sessions" and listed_ok:
        assert sid in out
    if how in META and entry in ("export md", "export json", "inspect", "recall"):
        assert code == 0, err  # the journal is intact: everything needed is there
        assert "redis" in out or entry == "inspect"


@pytest.mark.fault("damaged session files")
@pytest.mark.parametrize("how", META)
def test_repair_apply_writes_meta_back_from_the_journal(pristine, tmp_path, monkeypatch, how):
    data, _ws, sid = _copy(pristine, tmp_path)
    sd = data / "sessions" / sid
    _damage(sd, how, pristine[0])
    monkeypatch.setenv("TAILRENT_HOME", str(data))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    dry = CliRunner().invoke(cli, ["sessions", "repair", sid])
    assert dry.exit_code == 0, dry.output
    assert "meta.repaired.json" in dry.stdout and (sd / "meta.repaired.json").is_file()
    applied = CliRunner().invoke(cli, ["sessions", "repair", sid, "--apply"])
    assert applied.exit_code == 0, applied.output
    assert "rebuilt it from the journal" in applied.stdout
    rows = json.loads(CliRunner().invoke(cli, ["sessions", "--json"]).stdout)
    assert [(r["id"], r["note"]) for r in rows] == [(sid, None)], "listed, and nothing is damaged any more"
    assert rows[0]["title"].startswith("Message 0")
