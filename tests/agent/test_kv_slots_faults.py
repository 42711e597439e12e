"""KV slot files under hostile input (issue 27, item 7): a slot file cut short, replaced by a symlink or
swapped for another session's is never handed to the server to restore (llama.cpp's engine aborts
the whole process, GGML_ASSERT, on a short one); a server that restores 0 tokens is said; each falls
back to reading the context, in one line."""

from __future__ import annotations

import json

import pytest

from tests.models.test_kv_slots import ask, fake, home  # noqa: F401


@pytest.mark.fault("KV slot files")
@pytest.mark.parametrize("damage", ["truncated", "empty", "symlink", "another session's"])
def test_a_damaged_slot_file_is_not_restored(home, fake, tmp_path, monkeypatch, damage):
    fake.slot_dir = tmp_path / "slots"
    fake.slot_dir.mkdir()
    monkeypatch.setenv("TAILRENT_SLOTS_DIR", str(fake.slot_dir))
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    slot = fake.slot_dir / first["slot"]["save"]["file"]
    if damage == "truncated":
        slot.write_bytes(slot.read_bytes()[:100])
    elif damage == "empty":
        slot.write_bytes(b"")
    elif damage == "symlink":
        other = tmp_path / "elsewhere.bin"
        other.write_bytes(slot.read_bytes())
        slot.unlink()
        slot.symlink_to(other)
    else:
        slot.write_bytes(b"x" * 4096)  # another session's slot, of another size, under this name
    second = ask(home, fake, "--continue", "--json", "Two.")
    out = json.loads(second.stdout)
    assert out["saved"] is True and out["error"] is None
    assert not out["slot"]["restore"]["ok"]
    said = [ln for ln in second.stderr.splitlines() if "no KV slot restored" in ln]
    assert len(said) == 1 and first["slot"]["save"]["file"] in said[0]
    assert [a for a in fake.actions if a[0] == "restore"] == [], "never handed to the server"


@pytest.mark.fault("KV slot files (new cases, round two)")
@pytest.mark.parametrize("damage", ["another session's, same size", "a flipped bit", "not a slot file, same size"])
def test_a_slot_file_whose_content_changed_is_not_restored(home, fake, tmp_path, monkeypatch, damage):
    """Its size is right, so only its content tells: the digest taken after the save."""
    fake.slot_dir = tmp_path / "slots"
    fake.slot_dir.mkdir()
    monkeypatch.setenv("TAILRENT_SLOTS_DIR", str(fake.slot_dir))
    first = json.loads(ask(home, fake, "--json", "One.").stdout)
    other = json.loads(ask(home, fake, "--json", "Another session, another prompt.").stdout)
    assert first["session"] != other["session"]
    slot = fake.slot_dir / first["slot"]["save"]["file"]
    body = slot.read_bytes()
    if damage == "another session's, same size":
        swapped = (fake.slot_dir / other["slot"]["save"]["file"]).read_bytes()
        assert len(swapped) == len(body) and swapped != body
        slot.write_bytes(swapped)
    elif damage == "a flipped bit":
        slot.write_bytes(body[:500] + bytes([body[500] ^ 1]) + body[501:])
    else:
        slot.write_bytes(b"\x00" * len(body))
    second = ask(home, fake, "--resume", first["session"], "--json", "Two.")
    out = json.loads(second.stdout)
    assert out["saved"] is True and out["error"] is None and not out["slot"]["restore"]["ok"]
    said = [ln for ln in second.stderr.splitlines() if "no KV slot restored" in ln]
    assert len(said) == 1 and first["slot"]["save"]["file"] in said[0], second.stderr
    assert [a for a in fake.actions if a[0] == "restore"] == [], "never handed to the server"


@pytest.mark.fault("KV slot files (new cases, round two)")
@pytest.mark.parametrize("case", ["the server saved 0 tokens", "the slot is of another model"])
def test_an_empty_save_or_another_models_slot_is_one_line_and_never_restored(home, fake, tmp_path, monkeypatch, case):
    fake.slot_dir = tmp_path / "slots"
    fake.slot_dir.mkdir()
    monkeypatch.setenv("TAILRENT_SLOTS_DIR", str(fake.slot_dir))
    if case == "the server saved 0 tokens":
        fake.mode = "empty-slot"
    first = ask(home, fake, "--json", "One.")
    fake.mode = "ok"
    if case == "the slot is of another model":
        fake.model = "qwen.gguf"
    second = ask(home, fake, "--continue", "--json", "Two.")
    out = json.loads(second.stdout)
    assert out["saved"] is True and out["error"] is None and not out["slot"]["restore"]["ok"]
    said = "the server's slot held no tokens" if case.startswith("the server") else "this server runs qwen.gguf"
    assert len([ln for ln in first.stderr.splitlines() + second.stderr.splitlines() if said in ln]) == 1
    assert [a for a in fake.actions if a[0] == "restore"] == []


# -- the embedded engine (llama.cpp in tailrent's own process) ------------------------------------


def _engine_ask(home, ws, *args: str):
    import os
    import subprocess
    import sys

    from tests.support.engine import assemble_model_file, one_cpu

    env = {
        **os.environ,
        "TAILRENT_HOME": str(home),
        "TAILRENT_CONFIG_DIR": str(home.parent / "config"),
        "TAILRENT_WINDOW": "2048",
        "TAILRENT_MAX_REPLY_TOKENS": "4",
        "TAILRENT_FSYNC": "false",
        "OLLAMA_HOST": "http://127.0.0.1:9",
    }
    command = [sys.executable, "-m", "tailrent_tui", "--model", f"embedded:{assemble_model_file()}", "ask", "--json", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ws, timeout=300, check=False, preexec_fn=one_cpu)


@pytest.fixture(scope="module")
def engine_session(tmp_path_factory):
    """One session on the embedded engine whose slot was saved: (data dir, session id, slot file name)."""
    root = tmp_path_factory.mktemp("engine-slots")
    (root / "ws").mkdir()
    done = _engine_ask(root / "data", root / "ws", "Where do refresh tokens live? In redis, TTL 15 minutes.")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["slot"]["save"]["ok"], done.stderr[-2000:]
    return root, out["session"], out["slot"]["save"]["file"]


def _engine_copy(engine_session, tmp_path):
    import shutil

    root, sid, file = engine_session
    shutil.copytree(root / "data", tmp_path / "data")
    (tmp_path / "ws").mkdir()
    (sd,) = (tmp_path / "data").rglob(sid)
    return tmp_path / "data", tmp_path / "ws", sid, file, sd


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.fault("KV slot files (new cases, round two)")
@pytest.mark.parametrize("damage", ["one byte short", "one byte short, its size not recorded (older meta)", "half"])
def test_a_short_slot_file_never_aborts_the_embedded_engine(engine_session, tmp_path, damage):
    """llama.cpp asserts (GGML_ASSERT, SIGABRT) on a short slot file: in tailrent's own process."""
    home, ws, _sid, file, sd = _engine_copy(engine_session, tmp_path)
    slot = sd / "slots" / file
    body = slot.read_bytes()
    slot.write_bytes(body[: len(body) // 2] if damage == "half" else body[:-1])
    if "not recorded" in damage:  # as an older tailrent kept it: no size, no digest
        meta = json.loads((sd / "meta.json").read_text())
        for record in meta["slots"]:
            record["bytes"] = 0
            record.pop("digest", None)
        (sd / "meta.json").write_text(json.dumps(meta))
    done = _engine_ask(home, ws, "--continue", "And the TTL?")
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-1500:]}"
    out = json.loads(done.stdout)
    assert out["saved"] is True and out["error"] is None and not out["slot"]["restore"]["ok"]
    said = [ln for ln in done.stderr.splitlines() if "no KV slot restored" in ln]
    assert len(said) == 1 and file in said[0] and "Traceback" not in done.stderr


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.fault("KV slot files (new cases, round two)")
@pytest.mark.parametrize("damage", ["a symlink to elsewhere", "a file", "unwritable"])
def test_a_hostile_slot_dir_turns_slots_off_in_one_line_and_the_turn_goes_on(engine_session, tmp_path, damage):
    import shutil
    import subprocess

    home, ws, _sid, _file, sd = _engine_copy(engine_session, tmp_path)
    slots = sd / "slots"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    locked = False
    if damage == "a symlink to elsewhere":
        shutil.rmtree(slots)
        slots.symlink_to(elsewhere)
    elif damage == "a file":
        shutil.rmtree(slots)
        slots.write_text("not a directory\n")
    else:
        # root writes through a 0o500 mode: the immutable flag stops root too (where the file system has it)
        locked = subprocess.run(["chattr", "+i", str(slots)], capture_output=True, check=False).returncode == 0
        if not locked:
            slots.chmod(0o500)
    try:
        done = _engine_ask(home, ws, "--continue", "And the TTL?")
    finally:
        if locked:
            subprocess.run(["chattr", "-i", str(slots)], check=True)
        elif damage == "unwritable":
            slots.chmod(0o700)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-1500:]}"
    out = json.loads(done.stdout)
    assert out["saved"] is True and out["error"] is None and out["reply"], done.stderr[-1500:]
    off = [ln for ln in done.stderr.splitlines() if "KV slots off for this session" in ln]
    assert len(off) == 1 and str(slots) in off[0], done.stderr[-1500:]
    assert not [ln for ln in done.stderr.splitlines() if "KV slot not saved" in ln]
    resume = [ln for ln in done.stderr.splitlines() if "resume: the first request" in ln]
    assert resume and "the embedded engine starts empty" in resume[0], "never counted warm: the engine starts empty"
    assert list(elsewhere.iterdir()) == [], "nothing written through the symlink"
