"""KV slots on the real engine (issue 14's goal): `tailrent ask` turns on llama.cpp, the server
stopped, a new one started on the same slot dir, `ask --continue` restores the slot and the
server evaluates <= 5% of the context; with the slot file removed it falls back and says so.

gemma3-270m is a base model: only the server's counts are asserted, never its words.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine import ENGINE_THREADS, assemble_model_file

pytestmark = pytest.mark.engine

TAILRENT = str(Path(sys.executable).with_name("tailrent"))
# about 1,300 tokens of varied text: the context the restore must spare
LONG = " ".join(
    f"Note {i}: the service on port {8000 + i} keeps its cache for {i % 7 + 1} minutes because request {i} said so."
    for i in range(60)
)


def start_server(slot_dir: Path, n_ctx: int = 4096) -> Any:
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(assemble_model_file())
    params.n_ctx = n_ctx
    params.cpuparams.n_threads = ENGINE_THREADS  # one: see tests/support/engine.py
    params.cpuparams_batch.n_threads = ENGINE_THREADS
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.sampling.seed = 42
    params.sampling.temp = 0.0
    params.endpoint_slots = True
    params.slot_save_path = str(slot_dir) + "/"  # llama.cpp joins path and name with no separator
    return xlc.Server(params)


def stop(server: Any) -> None:
    del server
    gc.collect()


def ask(env: dict[str, str], ws: Path, url: str, *args: str) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        [TAILRENT, "--workspace", str(ws), "ask", "--model", f"openai:{url}", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.slow
def test_a_saved_slot_survives_a_restart_and_a_removed_one_falls_back(tmp_path):
    pytest.importorskip("xllamacpp")
    slot_dir = tmp_path / "slots"
    slot_dir.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {
        **os.environ,
        "TAILRENT_HOME": str(tmp_path / "data"),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "TAILRENT_FSYNC": "false",
        "TAILRENT_MAX_REPLY_TOKENS": "8",
        "TAILRENT_SLOTS_DIR": str(slot_dir),
    }
    for var in ("TAILRENT_MODEL", "TAILRENT_WINDOW", "TAILRENT_POLICY", "OLLAMA_HOST"):
        env.pop(var, None)

    server = start_server(slot_dir)
    url = server.listening_address
    first, _ = ask(env, ws, url, LONG)
    assert first["slot"]["save"]["ok"], first
    second, _ = ask(env, ws, url, "--continue", "And the cache?")
    assert second["slot"]["save"]["ok"] and second["usage"][0]["cached_tokens"] > 1000, "the live server kept the prefix"
    stop(server)

    server = start_server(slot_dir)
    restored, stderr = ask(env, ws, server.listening_address, "--continue", "Which port?")
    usage = restored["usage"][0]
    context = usage["prompt_tokens"]
    assert restored["slot"]["restore"]["ok"] and "KV slot restored" in stderr, stderr
    assert usage["evaluated_tokens"] <= 0.05 * context, usage
    assert restored["resume"]["saver"] == "slot"
    stop(server)

    for f in slot_dir.iterdir():
        f.unlink()
    server = start_server(slot_dir)
    try:
        cold, stderr = ask(env, ws, server.listening_address, "--continue", "Again?")
    finally:
        stop(server)
    assert not cold["slot"]["restore"]["ok"] and "no longer in the slot dir" in stderr, stderr
    assert cold["usage"][0]["evaluated_tokens"] >= 0.9 * cold["usage"][0]["prompt_tokens"], "falls back to a full read"
    # inside the TTL a live server may still hold the prefix: the line says so, and what a restart costs
    assert cold["resume"]["saver"] in ("none", "warm") and cold["slot"]["save"]["ok"]
    # why, said once: its own line, not again in the resume's price line
    why = cold["slot"]["restore"]["message"]
    assert why.startswith("the slot file") and len([line for line in stderr.splitlines() if why in line]) == 1, stderr
    assert f"if the server was restarted, all {cold['resume']['context_tokens']:,}" in stderr or cold["resume"]["saver"] == "none"
    print(
        f"\ncontext {context} tokens: restored slot evaluated {usage['evaluated_tokens']} "
        f"({usage['prompt_ms']} ms); without it {cold['usage'][0]['evaluated_tokens']} ({cold['usage'][0]['prompt_ms']} ms)"
    )
