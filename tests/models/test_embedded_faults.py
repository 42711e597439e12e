"""The embedded engine under hostile input (issue 27, item 7): a GGUF file that is missing, not a
GGUF, cut short, empty, a directory or a FIFO, or a model too big for the memory left. Each is one
line that names the file and what to do, exit 1, no traceback, and no line about KV slots of an
engine that never listened."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.engine import assemble_model_file

NOBODY = "http://127.0.0.1:9"


def _ask(tmp_path, model: str):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "TAILRENT_HOME": str(tmp_path / "data"),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "TAILRENT_WINDOW": "2048",
        "TAILRENT_MAX_REPLY_TOKENS": "4",
        "TAILRENT_FSYNC": "false",
        "OLLAMA_HOST": NOBODY,
    }
    command = [sys.executable, "-m", "tailrent_tui", "--model", model, "ask", "--json", "Hi"]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ws, timeout=300, check=False)


def _free_memory() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))


@pytest.mark.engine
@pytest.mark.fault("embedded engine (new, issue 27)")
@pytest.mark.parametrize(
    "damage",
    [
        "missing",
        "empty",
        "random bytes",
        "a text file",
        "a directory",
        "a FIFO",
        "cut short (GGUF header, no tensors)",
        "too big for memory (sparse)",
    ],
)
def test_a_bad_model_file_is_one_line_and_nothing_else(tmp_path, damage):
    gguf = tmp_path / "model.gguf"
    if damage == "empty":
        gguf.write_bytes(b"")
    elif damage == "random bytes":
        gguf.write_bytes(os.urandom(4096))
    elif damage == "a text file":
        gguf.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n")  # an LFS pointer
    elif damage == "a directory":
        gguf.mkdir()
    elif damage == "a FIFO":
        os.mkfifo(gguf)
    elif damage.startswith("cut short"):
        gguf.write_bytes(assemble_model_file().read_bytes()[: 3 * 1024 * 1024])
    elif damage.startswith("too big"):
        if not os.path.exists("/proc/meminfo"):
            pytest.skip("no /proc/meminfo to know the memory left")
        with open(gguf, "wb") as f:
            f.write(b"GGUF\x03\x00\x00\x00")
            f.truncate(_free_memory() * 2)  # sparse: nothing is written
    done = _ask(tmp_path, f"embedded:{gguf}")
    err = done.stderr
    assert done.returncode == 1, err[-1500:]
    assert "Traceback" not in err and "KV slot" not in err, err[-1500:]
    errors = [ln for ln in err.splitlines() if ln.lower().startswith("error:")]
    assert len(errors) == 1 and "model.gguf" in errors[0], err[-1500:]
    if damage in ("empty", "random bytes", "a text file"):
        assert "is not a GGUF model file" in errors[0]
    if damage.startswith("too big"):
        assert "too big for the memory left" in errors[0]
    if done.stdout.strip():
        out = json.loads(done.stdout)
        assert out["reply"] is None and out["error"]["message"] in errors[0]
