"""The tokenizer cache in ~/.cache/tailrent under hostile input (issue 27, item 7): corrupt
(duplicate ranks make tiktoken panic), a FIFO, unwritable, a symlink: never a panic, never a
hang; the counter is rebuilt (`core/tokens.py`).
"""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

COUNT = "from tailrent_tui.core.tokens import get_counter; print(get_counter('cl100k').count('hello world'))"


def _count_in_child(cache: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run([sys.executable, "-c", COUNT], capture_output=True, text=True, env=env, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    assert _count_in_child(cache).stdout.strip() == "2"
    (made,) = (cache / "tailrent").glob("*.marshal")
    return made


def _fresh(warm_cache: Path, tmp_path: Path) -> Path:
    target = tmp_path / "tailrent" / warm_cache.name
    target.parent.mkdir()
    target.write_bytes(warm_cache.read_bytes())
    return target


@pytest.mark.fault("tokenizer cache")
def test_a_cache_with_duplicate_ranks_is_rebuilt_not_a_panic(warm_cache, tmp_path):
    target = _fresh(warm_cache, tmp_path)
    params = marshal.loads(target.read_bytes())
    ranks = params["mergeable_ranks"]
    first, second = list(ranks)[:2]
    ranks[second] = ranks[first]  # one flipped bit in a rank: tiktoken's BPE panics on the duplicate
    target.write_bytes(marshal.dumps(params))
    done = _count_in_child(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]
    assert marshal.loads(target.read_bytes())["mergeable_ranks"][second] != ranks[first], "rebuilt"


@pytest.mark.fault("tokenizer cache")
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_cache_is_rebuilt(warm_cache, tmp_path, damage):
    target = _fresh(warm_cache, tmp_path)
    data = target.read_bytes()
    target.write_bytes({"truncated": data[: len(data) // 2], "garbage": os.urandom(4096), "empty": b""}[damage])
    done = _count_in_child(tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]


@pytest.mark.fault("tokenizer cache")
def test_a_fifo_in_place_of_the_cache_never_hangs(warm_cache, tmp_path):
    target = tmp_path / "tailrent" / warm_cache.name
    target.parent.mkdir()
    os.mkfifo(target)
    done = _count_in_child(tmp_path, timeout=30)  # before: blocked on open() for ever
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]


@pytest.mark.fault("tokenizer cache")
def test_an_unwritable_or_symlinked_cache_dir_still_counts(warm_cache, tmp_path):
    ro = tmp_path / "ro"
    (ro / "tailrent").mkdir(parents=True)
    (ro / "tailrent").chmod(0o500)
    try:
        done = _count_in_child(ro)
        assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]
    finally:
        (ro / "tailrent").chmod(0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "ln").mkdir()
    (tmp_path / "ln" / "tailrent").symlink_to(elsewhere)
    done = _count_in_child(tmp_path / "ln")
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-300:]
