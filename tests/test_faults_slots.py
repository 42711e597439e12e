"""KV slot files under hostile input (issue 27, item 7): a slot file cut short, replaced by a symlink or
swapped for another session's is never handed to the server to restore (llama.cpp's engine aborts
the whole process, GGML_ASSERT, on a short one); a server that restores 0 tokens is said; each falls
back to reading the context, in one line."""

from __future__ import annotations

import json

import pytest
from test_slots import ask, fake, home  # noqa: F401


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
