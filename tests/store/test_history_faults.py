"""The input history file under hostile input (issue 27, items 2 and 7): corrupt, 100 MB, a FIFO,
unwritable, a prompt that is not UTF-8 (`store/history.py`).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from tailrent_tui.store.history import PromptHistory


@pytest.mark.fault("input history file")
def test_a_corrupt_history_file_keeps_what_it_can(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"text": "first"}\n\x00\xff garbage\n[1,2]\n{"text": 5}\n{"text": "second"}\n{"te')
    history = PromptHistory(path)
    assert history.entries == ["first", "second"] and history.error is None
    history.append("third")
    assert PromptHistory(path).entries[-1] == "third"


@pytest.mark.fault("input history file")
def test_a_100_mb_history_file_is_read_by_its_end_and_rewritten(tmp_path):
    path = tmp_path / "h.jsonl"
    line = json.dumps({"text": "x" * 1000}) + "\n"
    with path.open("w") as f:
        for _ in range(100_000):  # ~100 MB
            f.write(line)
        f.write(json.dumps({"text": "the newest"}) + "\n")
    started = time.monotonic()
    history = PromptHistory(path, limit=50)
    assert time.monotonic() - started < 5
    assert history.entries[-1] == "the newest" and len(history.entries) <= 50
    history.append("one more")
    assert path.stat().st_size < 200_000, "rewritten to its newest entries"
    assert PromptHistory(path).entries[-2:] == ["the newest", "one more"]


@pytest.mark.fault("input history file")
def test_a_fifo_in_place_of_the_history_never_hangs(tmp_path):
    path = tmp_path / "h.jsonl"
    os.mkfifo(path)
    history = PromptHistory(path)  # before: read_text blocked for ever
    assert history.entries == [] and "not a regular file" in (history.error or "")
    history.append("hello")  # and the append (O_WRONLY on a FIFO with no reader) neither
    assert history.entries == ["hello"]


@pytest.mark.fault("input history file")
def test_an_unwritable_history_is_said_and_the_prompt_still_kept_in_memory(tmp_path):
    folder = tmp_path / "history"
    folder.mkdir()
    path = folder / "h.jsonl"
    path.write_text(json.dumps({"text": "old"}) + "\n")
    path.chmod(0o400)
    try:
        history = PromptHistory(path)
        history.append("new")
        assert history.entries == ["old", "new"]
        if os.geteuid() != 0:  # root writes anyway
            assert history.error and "not saved" in history.error
    finally:
        path.chmod(0o600)


@pytest.mark.fault("input history file")
def test_a_prompt_that_is_not_utf8_is_kept_in_the_history(tmp_path):
    path = tmp_path / "h.jsonl"
    history = PromptHistory(path)
    history.append(os.fsdecode(b"@caf\xe9.txt"))  # before: UnicodeEncodeError took the app down
    assert history.error is None
    assert PromptHistory(path).entries == ["@caf\ufffd.txt"]
