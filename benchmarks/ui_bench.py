"""UI figures: cold start to first frame, opening a 10,000-message session, key press to panel update.

Goals (issue 5): first frame under 1 s, a 10,000-message session open under
1.5 s, key-to-update under 100 ms while a reply streams. Issue 12: a fold's
first visible sign under 100 ms after it starts, and key-to-update while the
model writes a fold's summary. Issue 15: key to screen in the input with 10,000
prompts of history, under 50 ms. Run:

    .venv/bin/python benchmarks/ui_bench.py

Everything runs headless (`App.run_test`), on the mock model, with no server.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = "--child-cold-start"


def _first_frame_app(app_cls):
    """A subclass that records when its first frame has been drawn."""

    class Timed(app_cls):
        first_frame_at: float | None = None

        def on_mount(self) -> None:
            super().on_mount()
            self.call_after_refresh(self._mark)

        def _mark(self) -> None:
            if self.first_frame_at is None:
                self.first_frame_at = time.perf_counter()
                self.first_frame_epoch = time.time()  # the parent's clock: process start to first frame

    return Timed


async def _run_until_first_frame(app) -> None:
    async with app.run_test(size=(140, 40)) as pilot:
        while app.first_frame_at is None:
            await pilot.pause()


def child_cold_start(t0: float) -> None:
    """In a fresh interpreter: imports, settings, open_agent (no server: the mock), first frame."""
    from tailrent_tui.agent.lifecycle import open_agent
    from tailrent_tui.settings import load_settings
    from tailrent_tui.ui.app import TailrentApp

    tmp = Path(tempfile.mkdtemp())
    os.environ["OLLAMA_HOST"] = "http://127.0.0.1:9"  # nothing listens there: the probe fails fast
    settings = load_settings({"data_dir": tmp / "data", "workspace": tmp}).settings
    t_imported = time.perf_counter()

    async def run() -> None:
        async with open_agent(settings, {}) as agent:  # as `tailrent` opens the session
            t_agent = time.perf_counter()
            app = _first_frame_app(TailrentApp)(agent, settings)
            await _run_until_first_frame(app)
            print(
                f"{app.first_frame_at - t0:.4f} {t_imported - t0:.4f} {t_agent - t_imported:.4f} "
                f"{app.first_frame_at - t_agent:.4f} {app.first_frame_epoch:.6f} {agent.model.name}"
            )

    asyncio.run(run())


def cold_start(runs: int = 3, *, bytecode_cache: bool = False) -> list[float]:
    """Fresh processes to first frame. Without a bytecode cache every module is
    compiled from source at each start (this machine sets PYTHONDONTWRITEBYTECODE);
    with one (a normal Python, from the second start on), a warm-up run writes it first."""
    env = {**os.environ, "TAILRENT_CONFIG_DIR": tempfile.mkdtemp()}
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp()  # keep the cache out of the tree
        subprocess.run([sys.executable, __file__, CHILD], capture_output=True, check=True, env=env)
    out = []
    for _ in range(runs):
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, __file__, CHILD],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        in_child, imports, agent, app, frame_at = (float(x) for x in proc.stdout.split()[:5])
        # to the first frame, not to the process's exit (closing the agent and the interpreter come after)
        out.append(frame_at - t0)
        print(
            f"  cold start: {out[-1]:.3f} s wall (process start to first frame); inside Python {in_child:.3f} s ="
            f" imports {imports:.3f} + open_agent {agent:.3f} + app to first frame {app:.3f}",
            flush=True,
        )
    return out


def open_big_session(n: int = 10_000) -> tuple[float, float]:
    """(seconds to replay the journal with open_agent, seconds from the app to its first frame)."""
    from tailrent_tui.agent.lifecycle import open_agent
    from tailrent_tui.settings import load_settings
    from tailrent_tui.ui.app import TailrentApp

    tmp = Path(tempfile.mkdtemp())
    os.environ["TAILRENT_CONFIG_DIR"] = str(tmp / "config")
    flags = {"data_dir": tmp / "data", "workspace": tmp, "model": "mock"}
    settings = load_settings(flags).settings
    settings.fsync = False
    settings.policy = "none"

    async def write() -> str:
        async with open_agent(settings, flags, async_writer=False, new=True) as agent:
            s = agent.session
            for i in range(n):
                role = "user" if i % 2 == 0 else "assistant"
                s.add(role, f"message {i}: the cache on port {8000 + i % 100} keeps a {i % 60} minute TTL. " * 3, autopin=False)
            return s.id

    sid = asyncio.run(write())

    async def reopen() -> tuple[float, float]:
        t0 = time.perf_counter()
        async with open_agent(settings, {**flags, "resume": sid}) as agent:
            t1 = time.perf_counter()
            assert len(agent.session) == n, len(agent.session)
            app = _first_frame_app(TailrentApp)(agent, settings)
            t2 = time.perf_counter()
            await _run_until_first_frame(app)
            return t1 - t0, app.first_frame_at - t2

    return asyncio.run(reopen())


async def key_to_update(presses: int = 20) -> list[float]:
    """Pin/unpin a message while a long reply streams; time from the key to the Pins panel showing it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from ui_helpers import fill, make_agent, make_app

    tmp = Path(tempfile.mkdtemp())
    os.environ["TAILRENT_CONFIG_DIR"] = str(tmp / "config")
    agent = make_agent(tmp, script=[{"text": "streaming words " * 3000}], delay=0.002)
    fill(agent.session, 200)
    app = make_app(agent)
    out: list[float] = []
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"go", "enter")
        while app.transcript.reply is None or len(app.transcript.reply.text) < 100:
            await pilot.pause()
        target = app.transcript.view_of("m00199")
        target.focus()
        await pilot.pause()
        cost = app.sidebar.ledger.query_one(".cost")
        for i in range(presses):
            want = "1 pin ·" if i % 2 == 0 else "0 pins ·"
            key = "p" if i % 2 == 0 else "u"
            t0 = time.perf_counter()
            # the key event straight into the app's queue, as a terminal sends it
            # (pilot.press waits for the app to be idle, which it never is while streaming)
            app.simulate_key(key)
            while want not in str(cost.render()):
                if time.perf_counter() - t0 > 10:
                    raise RuntimeError(f"the Pins panel never showed {want!r}: {cost.render()}")
                await asyncio.sleep(0.0005)
            out.append(time.perf_counter() - t0)
        assert app.running, "the reply must still be streaming for this figure to mean anything"
        app.session_screen.action_cancel_reply()
        while app.running:
            await pilot.pause()
    return out


async def fold_watch(folds: int = 5, presses: int = 10) -> tuple[list[float], list[float], list[float]]:
    """A fold whose summary the model writes (held at a gate, as a slow server would):
    (key `f` to its status line on screen, the agent's report of the fold's start to the
    same, key to Pins panel while the summary is written). Each fold is then cancelled."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from ui_helpers import GatedModel, fill, make_agent, make_app

    from tailrent_tui.agent.loop import SummaryStarted
    from tailrent_tui.models.summarizer import ModelSummarizer

    tmp = Path(tempfile.mkdtemp())
    os.environ["TAILRENT_CONFIG_DIR"] = str(tmp / "config")
    agent = make_agent(tmp)
    fill(agent.session, 400, pad=2)
    agent.fold_requests.summarizer = ModelSummarizer(GatedModel())
    app = make_app(agent)
    from_key: list[float] = []
    from_start: list[float] = []
    keys: list[float] = []
    async with app.run_test(size=(140, 40)) as pilot:
        started: list[float] = []
        report = agent.fold_requests.on_summary  # the app's own, wrapped to time the agent's report

        def timed(progress) -> None:
            if isinstance(progress, SummaryStarted):
                started.append(time.perf_counter())
            report(progress)

        agent.fold_requests.on_summary = timed
        target = app.transcript.view_of("m00399")
        target.focus()
        await pilot.pause()
        cost = app.sidebar.ledger.query_one(".cost")
        for _ in range(folds):
            t0 = time.perf_counter()
            app.simulate_key("f")
            while (status := app.transcript.fold_status) is None or not status.region.height:
                if time.perf_counter() - t0 > 10:
                    raise RuntimeError("the fold's status line never showed")
                await asyncio.sleep(0.0005)
            shown = time.perf_counter()
            from_key.append(shown - t0)
            from_start.append(shown - started[-1])
            for i in range(presses):
                want = "1 pin ·" if i % 2 == 0 else "0 pins ·"
                t0 = time.perf_counter()
                app.simulate_key("p" if i % 2 == 0 else "u")
                while want not in str(cost.render()):
                    if time.perf_counter() - t0 > 10:
                        raise RuntimeError(f"the Pins panel never showed {want!r}: {cost.render()}")
                    await asyncio.sleep(0.0005)
                keys.append(time.perf_counter() - t0)
            assert app.transcript.fold_status is not None, "the fold must still run for these figures to mean anything"
            app.simulate_key("escape")
            while app.busy:
                await pilot.pause()
        assert not agent.session.folds, "every fold was cancelled"
    return from_key, from_start, keys


async def editor_keys(entries: int = 10_000, presses: int = 40) -> tuple[float, list[float], list[float], list[float]]:
    """Issue 15: the input with 10,000 prompts of history (loaded from its file).

    Times, from a key sent as a terminal sends it to the refresh that follows
    its effect: a typed character, up walking the history, and a key in the
    history search (which filters all 10,000 entries).
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from ui_helpers import fill, make_agent, make_app

    from tailrent_tui.store.history import PromptHistory

    tmp = Path(tempfile.mkdtemp())
    os.environ["TAILRENT_CONFIG_DIR"] = str(tmp / "config")
    path = tmp / "history.jsonl"
    path.write_text(
        "".join(f'{{"text": "prompt {i}: fold the logs of build {i % 97} and pin the decision"}}\n' for i in range(entries))
    )
    t0 = time.perf_counter()
    history = PromptHistory(path)
    load_s = time.perf_counter() - t0
    assert len(history.entries) == entries
    agent = make_agent(tmp)
    fill(agent.session, 200)
    app = make_app(agent, history=history)
    typed: list[float] = []
    walked: list[float] = []
    searched: list[float] = []

    async def timed(key: str, done) -> float:
        drawn = asyncio.Event()
        t0 = time.perf_counter()
        app.simulate_key(key)
        while not done():
            if time.perf_counter() - t0 > 10:
                raise RuntimeError(f"the key {key!r} never showed")
            await asyncio.sleep(0.0002)
        app.call_after_refresh(drawn.set)  # the refresh that draws it
        await drawn.wait()
        return time.perf_counter() - t0

    async with app.run_test(size=(140, 40)) as pilot:
        box = app.prompt
        await pilot.pause()
        for i in range(presses):
            ch = "abcdefghij"[i % 10]
            n = len(box.text)
            typed.append(await timed(ch, lambda n=n: len(box.text) == n + 1))
        for i in range(presses):
            want = history.entries[-1 - i]
            walked.append(await timed("up", lambda want=want: box.text == want))
        box.value = ""
        box.action_search_history()
        await pilot.pause()
        search = app.screen
        for i in range(presses // 4):
            ch = "0123456789"[i % 10]
            before = search.query_one("Input").value
            searched.append(
                await timed(
                    ch,
                    lambda want=before + ch: search.query_one("Input").value == want and search.matches == history.search(want),
                )
            )
    return load_s, typed, walked, searched


def main() -> None:
    print("tailrent UI benchmark (headless, mock model, 140x40)")
    print("compiling every module at each start (PYTHONDONTWRITEBYTECODE=1, as set here):")
    starts = cold_start()
    print(f"cold start to first frame, no bytecode cache: median {statistics.median(starts):.3f} s (goal < 1 s)")
    print("with Python's bytecode cache, as on a usual install from the second start on:")
    cached = cold_start(bytecode_cache=True)
    print(f"cold start to first frame, bytecode cached: median {statistics.median(cached):.3f} s (goal < 1 s)")
    replay_s, frame_s = open_big_session()
    print(
        f"10,000-message session: journal replay {replay_s:.3f} s + first frame {frame_s:.3f} s "
        f"= {replay_s + frame_s:.3f} s (goal < 1.5 s)"
    )
    keys = asyncio.run(key_to_update())
    keys_ms = sorted(k * 1000 for k in keys)
    print(
        f"key press to Pins panel update while a reply streams: median {statistics.median(keys_ms):.1f} ms, "
        f"max {keys_ms[-1]:.1f} ms over {len(keys_ms)} presses (goal < 100 ms)"
    )
    from_key, from_start, fold_keys = (sorted(x * 1000 for x in xs) for xs in asyncio.run(fold_watch()))
    print(
        f"a fold's status line on screen: median {statistics.median(from_start):.1f} ms, max {from_start[-1]:.1f} ms "
        f"after the fold starts; median {statistics.median(from_key):.1f} ms, max {from_key[-1]:.1f} ms after "
        f"the key f, over {len(from_key)} folds (goal < 100 ms)"
    )
    print(
        f"key press to Pins panel update while a fold's summary is written: median "
        f"{statistics.median(fold_keys):.1f} ms, max {fold_keys[-1]:.1f} ms over {len(fold_keys)} presses (goal < 100 ms)"
    )
    load_s, typed, walked, searched = asyncio.run(editor_keys())
    print(f"the input with 10,000 prompts of history (loaded in {load_s * 1000:.0f} ms), key to screen (goal < 50 ms):")
    for what, xs in (
        ("a typed character", typed),
        ("up, walking the history", walked),
        ("a key in the history search (filters all 10,000)", searched),
    ):
        ms = sorted(x * 1000 for x in xs)
        print(f"  {what}: median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} presses")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        child_cold_start(time.perf_counter())
    else:
        main()
