"""KV slots that survive restarts (issue 14, items 1 and 6): the pure rules, then `tailrent ask`
against a scripted llama.cpp server over real HTTP for every bad input (no slot endpoints, no
--slot-save-path, a full disk, a refused restore, another model, another prompt, a clock jump).

The real engine's run (save, restart, restore, prompt_n <= 5%) is tests/test_slots_engine.py.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tailrent_tui.agent import kv_slots
from tailrent_tui.cli import cli
from tailrent_tui.core.kv_slots import (
    ResumePrice,
    SlotFile,
    SlotRecord,
    choose_restore,
    cleanup_plan,
    parse_slot_file_name,
    prefix_hash,
    resume_price,
    slot_file_name,
)
from tailrent_tui.store.sessions import find_session

MB = 1024 * 1024

# -- the pure rules ------------------------------------------------------------------------


def test_prefix_hash_covers_model_tools_and_every_character():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}]
    base = prefix_hash("m", None, msgs)
    assert base == prefix_hash("m", [], [dict(m) for m in msgs]), "canonical: no tools is no tools"
    assert base != prefix_hash("other", None, msgs)
    assert base != prefix_hash("m", [{"type": "function"}], msgs)
    assert base != prefix_hash("m", None, [msgs[0], {"role": "user", "content": "hello "}])
    assert len(base) == 16


def test_file_names_round_trip_and_others_are_not_ours():
    name = slot_file_name("20261102-090000-3fa9c1", "0123456789abcdef")
    assert name == "tailrent-20261102-090000-3fa9c1-0123456789abcdef.bin"
    assert parse_slot_file_name(name) == ("20261102-090000-3fa9c1", "0123456789abcdef")
    for other in ("x.bin", "tailrent-abc.bin", "tailrent-s-0123.bin", name + ".tmp", "../" + name):
        assert parse_slot_file_name(other) is None


def _record(n: int, digest: str, at: float, model: str = "m", file: str | None = None) -> SlotRecord:
    return SlotRecord(file=file or f"f{at:g}.bin", hash=digest, messages=n, model=model, saved_at=at, tokens=100 * n)


def test_restore_picks_the_newest_matching_record_and_says_why_not_otherwise():
    def hash_of_first(n: int) -> str | None:
        return {2: "h2", 4: "h4"}.get(n)

    pick = choose_restore([_record(2, "h2", 1), _record(4, "h4", 2)], "m", hash_of_first)
    assert pick.ok and pick.record is not None and pick.record.messages == 4
    # the newest no longer matches (a fold since): the older prefix still does
    pick = choose_restore([_record(2, "h2", 1), _record(4, "zz", 2)], "m", hash_of_first)
    assert pick.ok and pick.record is not None and pick.record.messages == 2
    other_model = choose_restore([_record(4, "h4", 2, model="gemma")], "qwen", hash_of_first)
    assert not other_model.ok and "from model gemma" in other_model.reason and "qwen" in other_model.reason
    other_prompt = choose_restore([_record(4, "zz", 2)], "m", hash_of_first)
    assert not other_prompt.ok and "another prompt" in other_prompt.reason
    gone = choose_restore([_record(4, "h4", 2, file="x.bin")], "m", hash_of_first, exists=lambda name: False)
    assert not gone.ok and "x.bin is no longer in the slot dir" in gone.reason
    assert not choose_restore([], "m", hash_of_first).ok


def test_cleanup_keeps_the_file_just_saved_and_deletes_the_oldest_past_each_cap():
    files = [
        SlotFile("a1", "a", 40 * MB, 1.0),
        SlotFile("a2", "a", 40 * MB, 2.0),
        SlotFile("a3", "a", 40 * MB, 3.0),
        SlotFile("b1", "b", 40 * MB, 1.5),
        SlotFile("b2", "b", 40 * MB, 2.5),
    ]
    # per session 100 MB: a keeps a3 (just saved) and a2; b keeps both
    doomed = cleanup_plan(files, keep="a3", session_cap=100 * MB, total_cap=10_000 * MB)
    assert [f.name for f in doomed] == ["a1"]
    # in total 130 MB: newest first a3 (kept), b2, a2, then b1 and a1 go, oldest first
    doomed = cleanup_plan(files, keep="a3", session_cap=100 * MB, total_cap=130 * MB)
    assert [f.name for f in doomed] == ["a1", "b1"]
    # the file just saved survives even when it alone is past both caps
    assert cleanup_plan([SlotFile("big", "a", 900 * MB, 1.0)], keep="big", session_cap=MB, total_cap=MB) == []
    # a clock that jumped back (the newest save has the oldest mtime) still keeps it
    jumped = [SlotFile("new", "a", 60 * MB, 0.5), SlotFile("old", "a", 60 * MB, 9.0)]
    assert [f.name for f in cleanup_plan(jumped, keep="new", session_cap=100 * MB, total_cap=10_000 * MB)] == ["old"]


def test_resume_price_says_tokens_seconds_dollars_and_what_spares_them():
    cold = resume_price(
        context_tokens=8000, restored_tokens=None, warm=False, why="idle 9 h", tokens_per_second=500, rate_measured=True
    )
    assert cold.to_read == 8000 and cold.seconds == pytest.approx(16.0)
    assert cold.line() == "resume: the first request re-reads 8,000 of 8,000 context tokens (~16 s); idle 9 h"
    folded = resume_price(
        context_tokens=8000,
        restored_tokens=None,
        warm=False,
        why="idle 9 h",
        tokens_per_second=500,
        rate_measured=True,
        fold_to=1200,
    )
    assert folded.saver == "fold" and folded.to_read == 1200 and folded.seconds == pytest.approx(2.4)
    assert folded.line() == (
        "resume: the cache is cold, so the ladder folds the 8,000-token context to about 1,200 "
        "(deeper than a fold in use: the prefix is read again anyway) and the first request re-reads that (~2.4 s); idle 9 h"
    )
    # the model writes the fold's summary first: reading its span and writing the summary take time too
    by_model = resume_price(
        context_tokens=8000,
        restored_tokens=None,
        warm=False,
        why="idle 9 h",
        tokens_per_second=500,
        rate_measured=True,
        fold_to=1200,
        summary_read=6500,
        summary_write=800,
        gen_tokens_per_second=40,
    )
    assert by_model.summary_seconds == pytest.approx(6500 / 500 + 800 / 40)
    assert by_model.seconds == pytest.approx(2.4 + 13 + 20)
    assert "re-reads that (~35 s with the summary); idle 9 h" in by_model.line()
    # before any timed reply the writing's speed is unknown: said, not guessed
    unknown = resume_price(
        context_tokens=8000,
        restored_tokens=None,
        warm=False,
        why="",
        tokens_per_second=500,
        rate_measured=True,
        fold_to=1200,
        summary_read=6500,
        summary_write=800,
    )
    assert unknown.seconds == pytest.approx(2.4 + 13) and unknown.summary_seconds is None
    assert "(~15 s plus writing a summary of up to 800 tokens)" in unknown.line()
    # no fold, no summary
    assert (
        resume_price(
            context_tokens=8000,
            restored_tokens=7990,
            warm=False,
            why="",
            tokens_per_second=500,
            rate_measured=True,
            fold_to=1200,
            summary_read=6500,
            summary_write=800,
            gen_tokens_per_second=40,
        ).summary_tokens
        == 0
    )
    # a fold is no saver when a slot was restored or the cache is warm
    assert (
        resume_price(
            context_tokens=8000, restored_tokens=7990, warm=False, why="", tokens_per_second=500, rate_measured=True, fold_to=1200
        ).saver
        == "slot"
    )
    slot = resume_price(context_tokens=8000, restored_tokens=7990, warm=False, why="", tokens_per_second=500, rate_measured=True)
    assert slot.to_read == 10 and slot.saver == "slot" and "a restored KV slot spares 7,990 tokens (~16 s)" in slot.line()
    priced = resume_price(
        context_tokens=100_000,
        restored_tokens=None,
        warm=False,
        why="",
        tokens_per_second=None,
        rate_measured=False,
        input_per_mtok=3.0,
        write_multiplier=1.25,
        read_multiplier=0.1,
    )
    assert priced.usd == pytest.approx(0.375) and "$0.3750" in priced.line()
    warm = resume_price(
        context_tokens=100_000,
        restored_tokens=None,
        warm=True,
        why="inside the TTL",
        tokens_per_second=None,
        rate_measured=False,
        input_per_mtok=3.0,
        write_multiplier=1.25,
        read_multiplier=0.1,
    )
    assert warm.to_read == 0 and warm.usd == pytest.approx(0.03)
    assert warm.line() == (
        "resume: the first request re-reads 0 of 100,000 context tokens ($0.0300) if the cache is still warm "
        "(inside the TTL); if the server was restarted, all 100,000 ($0.3750)"
    )


# -- a scripted llama.cpp server --------------------------------------------------------------


@dataclass
class FakeLlama:
    """What a llama.cpp server answers, and what it was asked."""

    mode: str = "ok"  # ok, no-endpoints, no-save-path, disk-full, refuse-restore, empty-slot
    model: str = "gemma-3-270m.gguf"
    slot_dir: Path | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)
    actions: list[tuple[str, str]] = field(default_factory=list)
    slot_tokens: int = 0
    #: whether GET /slots shows the slot still holding the last request (False: as if restarted between runs)
    keeps_slot: bool = False
    url: str = ""

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if path.startswith("/v1/models"):
            return 200, {"data": [{"id": self.model, "meta": {"n_ctx": 4096}}]}
        if path.startswith(("/props", "/slots")) and self.mode == "no-endpoints":
            return 404, {"error": {"code": 404, "message": "File Not Found"}}
        if path == "/props":
            return 200, {"total_slots": 1, "model_path": "/models/" + self.model, "default_generation_settings": {"n_ctx": 4096}}
        if path == "/slots" and method == "GET":
            if self.mode == "no-listing":
                return 501, {"error": {"code": 501, "message": "This server does not support slots endpoint."}}
            slot: dict[str, Any] = {"id": 0, "n_ctx": 4096, "is_processing": False}
            if self.slot_tokens and self.keeps_slot:
                # llama.cpp counts the prompt and what it generated, less the last token (1 here)
                slot.update(id_task=len(self.bodies), n_prompt_tokens=self.slot_tokens)
            return 200, [slot]
        if path.startswith("/slots/0?action="):
            action = path.split("=", 1)[1]
            name = body["filename"]
            self.actions.append((action, name))
            if self.mode == "no-save-path":
                return 501, {
                    "error": {
                        "code": 501,
                        "message": "This server does not support slots action. Start it with `--slot-save-path`",
                        "type": "not_supported_error",
                    }
                }
            if action == "save":
                if self.mode == "disk-full":
                    return 500, {"error": {"code": 500, "message": "failed to write slot file: No space left on device"}}
                if self.slot_dir is not None:
                    # a llama.cpp slot file's magic, then what this save held: each save's file differs
                    (self.slot_dir / name).write_bytes((b"qsgg" + f"{name}:{self.slot_tokens};".encode() * 100)[:1000])
                return 200, {
                    "id_slot": 0,
                    "filename": name,
                    "n_saved": 0 if self.mode == "empty-slot" else self.slot_tokens,
                    "n_written": 1000,
                    "timings": {"save_ms": 1.5},
                }
            if self.mode == "refuse-restore" or (self.slot_dir is not None and not (self.slot_dir / name).exists()):
                return 400, {
                    "error": {
                        "code": 400,
                        "message": "Unable to restore slot: No available space in KV cache or invalid slot save file",
                    }
                }
            return 200, {"id_slot": 0, "filename": name, "n_restored": 30, "n_read": 1000, "timings": {"restore_ms": 0.4}}
        if path == "/v1/chat/completions":
            self.bodies.append(body)
            self.slot_tokens = 40 * len(body["messages"])
            return 200, None
        return 404, {"error": {"code": 404, "message": "File Not Found"}}


def _sse(fake: FakeLlama) -> bytes:
    lines = [
        {"choices": [{"delta": {"content": "ok"}}], "model": fake.model},
        {"choices": [{"delta": {}, "finish_reason": "stop"}], "model": fake.model},
        {
            "choices": [],
            "usage": {"prompt_tokens": fake.slot_tokens, "completion_tokens": 1},
            "timings": {
                "cache_n": 0,
                "prompt_n": fake.slot_tokens,
                "prompt_ms": fake.slot_tokens * 2.0,
                "predicted_n": 1,
                "predicted_ms": 1.0,
            },
        },
    ]
    return b"".join(b"data: " + json.dumps(x).encode() + b"\n\n" for x in lines) + b"data: [DONE]\n\n"


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    state = FakeLlama()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, method: str) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            status, payload = state.answer(method, self.path, body)
            data = _sse(state) if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "text/event-stream" if payload is None else "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply("GET")

        def do_POST(self) -> None:
            self._reply("POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("TAILRENT_HOME", str(data))
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TAILRENT_FSYNC", "false")
    monkeypatch.setenv("TAILRENT_TOKENIZER", "cl100k")
    for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "TAILRENT_YOLO", "OLLAMA_HOST", "TAILRENT_SLOTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "ws").mkdir()
    return data


def ask(home: Path, fake: FakeLlama, *args: str) -> Any:
    ws = home.parent / "ws"
    result = CliRunner().invoke(
        cli, ["--workspace", str(ws), "ask", "--model", f"openai:{fake.url}", *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result


def _meta_slots(home: Path, session: str) -> list[SlotRecord]:
    return find_session(home, session).read_meta().slots


def test_ask_pins_requests_saves_at_the_end_and_restores_on_continue(home, fake, tmp_path, monkeypatch):
    fake.slot_dir = tmp_path / "slots"
    fake.slot_dir.mkdir()
    monkeypatch.setenv("TAILRENT_SLOTS_DIR", str(fake.slot_dir))
    first = json.loads(ask(home, fake, "--json", "Where do refresh tokens live?").stdout)
    assert all(b.get("id_slot") == 0 for b in fake.bodies), "every request is pinned to slot 0"
    assert first["slot"]["save"]["ok"] and fake.actions == [("save", first["slot"]["save"]["file"])]
    records = _meta_slots(home, first["session"])
    assert [r.file for r in records] == [first["slot"]["save"]["file"]] and records[0].messages == 2
    assert (fake.slot_dir / records[0].file).exists()

    second = ask(home, fake, "--continue", "--json", "And the TTL?")
    out = json.loads(second.stdout)
    assert out["slot"]["restore"]["ok"] and out["slot"]["restore"]["tokens"] == 30
    assert fake.actions[1] == ("restore", records[0].file), "restored before the first request"
    assert "[info] KV slot restored: 30 tokens" in second.stderr
    assert "a restored KV slot spares 30 tokens" in second.stderr
    assert out["resume"]["saver"] == "slot"
    # the new save replaces the old one: the session cap keeps both here (2 x 1000 bytes)
    listed = json.loads(CliRunner().invoke(cli, ["sessions", "--json"]).stdout)
    files = listed[0]["slots"]
    assert len(files) == 2 and all(f["exists"] and f["bytes"] == 1000 for f in files)


def test_a_slot_file_removed_falls_back_and_says_so(home, fake, tmp_path, monkeypatch):
    fake.slot_dir = tmp_path / "slots"
    fake.slot_dir.mkdir()
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    (fake.slot_dir / first["slot"]["save"]["file"]).unlink()
    # without slot_dir tailrent cannot look: the server refuses, and that is said
    second = ask(home, fake, "--continue", "Two.")
    assert "no KV slot restored: the server refused to restore" in second.stderr
    assert "the first request re-reads the whole context" in second.stderr
    # with slot_dir it looks first and names the missing file
    monkeypatch.setenv("TAILRENT_SLOTS_DIR", str(fake.slot_dir))
    for f in fake.slot_dir.iterdir():
        f.unlink()
    third = ask(home, fake, "--continue", "Three.")
    assert "is no longer in the slot dir" in third.stderr
    assert [a for a in fake.actions if a[0] == "restore"] == [("restore", first["slot"]["save"]["file"])]


def test_another_prompt_or_another_model_is_not_restored(home, fake):
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    sd = find_session(home, first["session"])
    record = sd.read_meta().slots[0]
    sd.update_meta(slots=[record.model_copy(update={"hash": "0" * 16})])
    out = ask(home, fake, "--continue", "Two.")
    assert "no KV slot restored: the saved slot holds another prompt" in out.stderr
    fake.model = "qwen.gguf"
    out = ask(home, fake, "--continue", "Three.")
    assert "no KV slot restored" in out.stderr and "this server runs qwen.gguf" in out.stderr
    assert not [a for a in fake.actions if a[0] == "restore"]


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("no-endpoints", "KV slots off for this session: "),
        ("no-save-path", "start it with --slot-save-path DIR/"),
        ("disk-full", "KV slot not saved (end of ask): failed to write slot file: No space left on device; carrying on"),
        ("empty-slot", "KV slot not saved (end of ask): the server's slot held no tokens"),
    ],
)
def test_servers_without_slots_and_failed_saves_are_one_line_and_the_turn_goes_on(home, fake, mode, said):
    fake.mode = mode
    result = ask(home, fake, "Hello.")
    assert result.stdout.strip() == "ok"
    lines = [line for line in result.stderr.splitlines() if said in line]
    assert len(lines) == 1 and "Traceback" not in result.stderr
    again = ask(home, fake, "--continue", "Again.")
    assert again.stdout.strip() == "ok" and "Traceback" not in again.stderr
    # once a run: the next run asks again (the server may have been restarted with a slot path)
    assert len([line for line in again.stderr.splitlines() if said.replace("(end of ask)", "") in line]) <= 1
    if mode == "no-endpoints":
        assert all("id_slot" not in b for b in fake.bodies)
    if mode == "empty-slot":  # nothing recorded, so nothing restored: a file of an empty slot holds no prefix
        assert not [a for a in fake.actions if a[0] == "restore"]


def test_a_refused_restore_falls_back(home, fake):
    ask(home, fake, "One.")
    fake.mode = "refuse-restore"
    out = ask(home, fake, "--continue", "Two.")
    assert "no KV slot restored: the server refused to restore" in out.stderr
    assert "re-reads" in out.stderr and out.stdout.strip() == "ok"


@pytest.mark.parametrize("case", ["file removed", "refused", "another prompt", "no save path", "no endpoints", "none saved"])
def test_why_no_slot_was_restored_is_said_once_on_a_resume(home, fake, tmp_path, monkeypatch, case):
    """The reason is one line of its own (or the probe's), and the price line does not repeat it;
    with nothing saved (no line of its own), the price line carries it."""
    if case == "file removed":
        fake.slot_dir = tmp_path / "slots"
        fake.slot_dir.mkdir()
        monkeypatch.setenv("TAILRENT_SLOTS_DIR", str(fake.slot_dir))
    fake.mode = {"no save path": "no-save-path", "no endpoints": "no-endpoints", "none saved": "disk-full"}.get(case, "ok")
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    if case == "file removed":
        for f in fake.slot_dir.iterdir():
            f.unlink()
    elif case == "refused":
        fake.mode = "refuse-restore"
    elif case == "another prompt":
        sd = find_session(home, first["session"])
        sd.update_meta(slots=[r.model_copy(update={"hash": "0" * 16}) for r in sd.read_meta().slots])
    elif case == "none saved":
        fake.mode = "ok"
    again = ask(home, fake, "--continue", "--json", "Two.")
    why = json.loads(again.stdout)["slot"]["restore"]["message"]
    assert why and not json.loads(again.stdout)["slot"]["restore"]["ok"]
    saying = [line for line in again.stderr.splitlines() if why in line]
    assert len(saying) == 1, again.stderr
    assert len([line for line in again.stderr.splitlines() if "resume: the first request re-reads" in line]) == 1


def test_without_slot_dir_the_files_are_recorded_and_cleanup_is_said_once(home, fake):
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    out = ask(home, fake, "--continue", "Two.")
    assert "set [slots] dir (the server's --slot-save-path)" in out.stderr
    records = _meta_slots(home, first["session"])
    assert len(records) == 2 and {r.bytes for r in records} == {1000}
    listed = json.loads(CliRunner().invoke(cli, ["sessions", "--json"]).stdout)
    assert [f["exists"] for f in listed[0]["slots"]] == [None, None]


def test_slot_dir_caps_delete_the_oldest(home, fake, tmp_path, monkeypatch):
    fake.slot_dir = tmp_path / "slots"
    fake.slot_dir.mkdir()
    monkeypatch.setenv("TAILRENT_SLOTS_DIR", str(fake.slot_dir))
    monkeypatch.setattr(kv_slots, "SESSION_SLOT_MB", 1)
    other = fake.slot_dir / "tailrent-old-session-0123456789abcdef.bin"
    other.write_bytes(b"x" * (MB - 500))
    os.utime(other, (1, 1))
    notmine = fake.slot_dir / "someone-else.bin"
    notmine.write_bytes(b"y")
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    monkeypatch.setattr(kv_slots, "TOTAL_SLOT_MB", 1)
    time.sleep(0.01)
    ask(home, fake, "--continue", "Two.")
    left = sorted(p.name for p in fake.slot_dir.iterdir())
    # total cap 1 MB: the other session's old file goes first; the session's two small ones fit
    assert other.name not in left and notmine.name in left
    assert len(_meta_slots(home, first["session"])) == 2


def test_a_clock_behind_the_last_request_is_counted_cold(home, fake, monkeypatch):
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    sd = find_session(home, first["session"])
    sd.update_meta(slots=[])
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    fake.mode = "no-listing"  # nothing but the clock to go by
    out = ask(home, fake, "--continue", "Two.")
    assert "the clock is 60 min behind the last request" in out.stderr and "counted cold" in out.stderr


# -- the app: the resume notice, the save after an idle turn, the save on quit -----------------


def test_the_app_says_the_resume_price_restores_and_saves_when_idle_and_on_quit(home, fake, tmp_path):
    import asyncio

    from ui_helpers import wait_until

    from tailrent_tui.agent.build import build_agent
    from tailrent_tui.settings import load_settings
    from tailrent_tui.ui.app import TailrentApp

    first = json.loads(ask(home, fake, "--json", "The API listens on port 8443.").stdout)
    settings = load_settings({"model": f"openai:{fake.url}", "workspace": home.parent / "ws"}).settings
    agent = build_agent(settings, {"continue_": True})
    assert agent.session.id == first["session"] and agent.link.resumed
    app = TailrentApp(agent, settings)
    app.session_screen.clocks.slot_save_idle = 0.2

    def notices() -> list[str]:
        return [str(w.render()) for w in app.transcript.query(".turn-notice")]

    async def resume() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            said = lambda: [t for t in notices() if t.startswith(("KV slot restored", "resume:"))]  # noqa: E731
            await wait_until(pilot, lambda: len(said()) == 2, what="the resume notices in the transcript")
            restored, price = said()
            assert restored.startswith("KV slot restored: 30 tokens from " + first["slot"]["save"]["file"])
            assert price.startswith("resume: the first request re-reads") and "a restored KV slot spares 30 tokens" in price
            assert fake.actions[-1] == ("restore", first["slot"]["save"]["file"])
            await pilot.press(*"which port?", "enter")
            await wait_until(pilot, lambda: fake.actions[-1][0] == "save", what="the save after an idle turn")
            await wait_until(
                pilot, lambda: any("KV slot saved (idle 0.2 s)" in str(n.message) for n in app._notifications), what="its notice"
            )
            saves = len([a for a in fake.actions if a[0] == "save"])
            app.session_screen.clocks.slot_save_idle = 60.0  # the next turn is not left idle long enough
            await pilot.press(*"and the TTL?", "enter")
            await wait_until(pilot, lambda: not app.running and len(fake.bodies) == 3, what="the second reply")
            await pilot.press("ctrl+q")
        assert len([a for a in fake.actions if a[0] == "save"]) == saves, "quit before the idle timer: not saved yet"

    asyncio.run(resume())
    asyncio.run(agent.aclose())  # the close `open_agent` runs: the slot saved on quit
    saved = [a for a in fake.actions if a[0] == "save"]
    assert len(saved) == 3 and len({name for _, name in saved}) == 3, "ask, idle, quit: three prefixes"
    assert len(find_session(home, first["session"]).read_meta().slots) == 3


# -- issue 26, item 1: a resume asks the server what its slot holds; it never folds a context
# that fits unless folding is cheaper than re-reading it ------------------------------------

LONG = " ".join(f"step {i}: the parser in module_{i}.py reads the header, then the body, then the footer" for i in range(60))
FOURTEEN_HOURS = 14 * 3600.0


def _morning(home: Path, fake: FakeLlama, monkeypatch, *env: tuple[str, str], restart: bool = False) -> dict[str, Any]:
    for name, value in env:
        monkeypatch.setenv(name, value)
    fake.keeps_slot = True
    first = json.loads(ask(home, fake, "--json", "Read this and remember it: " + LONG).stdout)
    ask(home, fake, "--continue", "Thanks, that is all for today.")  # the long message is no longer the last two
    find_session(home, first["session"]).update_meta(slots=[])  # no saved slot to restore: the server's own decides
    if restart:
        fake.slot_tokens = 0  # the server was started again overnight: its slot is empty
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + FOURTEEN_HOURS)
    before = len(fake.bodies)
    out = json.loads(ask(home, fake, "--continue", "--json", "Which module reads the footer?").stdout)
    out["requests"] = fake.bodies[before:]
    return out


def test_a_server_whose_slot_still_holds_the_context_is_warm_after_14_hours(home, fake, monkeypatch):
    out = _morning(home, fake, monkeypatch)
    price = out["resume"]
    assert price["saver"] == "warm" and price["to_read"] == 0
    assert "idle 14.0 h; the server's slot still holds the last request's" in price["why"]
    # nothing folded: one request, the whole conversation, predicted cached
    assert len(out["requests"]) == 1 and LONG in json.dumps(out["requests"][0])
    assert out["rent"]["predicted_cached"] > 0


def test_a_restarted_server_is_cold_and_a_model_fold_that_costs_more_than_the_reread_is_not_made(home, fake, monkeypatch):
    out = _morning(home, fake, monkeypatch, restart=True)
    price = out["resume"]
    assert price["saver"] == "none" and price["to_read"] == price["context_tokens"]
    assert "the server's slot is empty: it was started since the last request" in price["why"]
    assert "no fold first" in price["why"]
    # no summary request: the one request carries the whole conversation, predicted cold
    assert len(out["requests"]) == 1 and LONG in json.dumps(out["requests"][0])
    assert out["rent"]["predicted_cached"] == 0


def test_a_restarted_server_with_a_free_summary_folds_since_that_is_cheaper(home, fake, monkeypatch):
    out = _morning(home, fake, monkeypatch, ("TAILRENT_FOLD_SUMMARIZER", "extractive"), restart=True)
    price = out["resume"]
    assert price["saver"] == "fold" and price["to_read"] < price["context_tokens"]
    assert len(out["requests"]) == 1 and LONG not in json.dumps(out["requests"][0])


def test_a_server_that_lists_no_slots_is_not_folded_at_resume(home, fake, monkeypatch):
    fake.mode = "no-listing"
    out = _morning(home, fake, monkeypatch, ("TAILRENT_FOLD_SUMMARIZER", "extractive"))
    price = out["resume"]
    assert price["saver"] == "warm", "no TTL is known for llama.cpp: the cache is not assumed gone"
    assert "GET /slots is off" in price["why"] and "if the server was restarted" in ResumePrice(**price).line()
    assert len(out["requests"]) == 1 and LONG in json.dumps(out["requests"][0])


def test_a_server_restarted_during_a_pause_is_predicted_cold(home, fake):
    """Issue 26, item 10: after a pause the server is asked what its slot holds; a restart
    (an empty slot) makes the next request's prediction cold, and says so once."""
    import asyncio

    from tailrent_tui.agent.build import build_agent
    from tailrent_tui.settings import Settings

    fake.keeps_slot = True
    settings = Settings(model=f"openai:{fake.url}", workspace=home.parent / "ws", data_dir=home, fsync=False)
    agent = build_agent(settings, async_writer=False, new=True)
    now = [time.time()]
    agent.session.clock = lambda: now[0]
    try:
        assert asyncio.run(agent.turn("Read this: " + LONG, None)).error is None
        now[0] += 600
        assert asyncio.run(agent.turn("Still there?", None)).error is None
        assert agent.session.usage[-1].predicted_cached > 0, "the slot held it: warm"
        now[0] += 600
        fake.slot_tokens = 0
        assert asyncio.run(agent.turn("And now?", None)).error is None
        assert agent.session.usage[-1].predicted_cached == 0
        said = [n.text for n in agent.session.notes if "the server's slot is empty" in n.text]
        assert said == [
            "the server's slot is empty: it was started since the last request: this request re-reads the whole context"
        ]
    finally:
        asyncio.run(agent.aclose())  # the close `open_agent` runs: the slot saved on quit
