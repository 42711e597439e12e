"""Issue 26's figures: what the first request after a resume evaluated, on a real llama.cpp server.

    .venv/bin/python ../shared/tools/llama_server.py --slots /tmp/slots     # prints URL
    .venv/bin/python benchmarks/resume_figures.py URL [--turns 8]

Yesterday: a session of `--turns` turns through the agent (`build_agent`, the path the app and
`ask` share), closed as quitting does (the KV slot saved). Then a pause of 14 hours (the clock
moved, as the tests do), and three mornings on copies of that session:

- kept:     the server ran all night and its slot still holds the conversation;
- no slot:  another client's prompt took the slot overnight, and no saved slot file is offered;
- restored: the same, with the slot file saved at quit (restored before the first request).

For each: the resume line, folds before the first request, and that request's evaluated tokens
(`timings.prompt_n`) and prompt time. Run it with PYTHONPATH pointing at an older checkout for
the "before" figures (settings it does not know are left out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tailrent_tui.agent import build as build_mod
from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.lifecycle import open_agent
from tailrent_tui.settings import Settings

PAUSE = 14 * 3600.0
FACT = (
    "Note {i}: the service number {i} listens on port {port} because the old host ran out of memory; "
    "it runs version 2.{i}.0, and we went over it at standup, so it goes on the deploy checklist."
)


def settings_for(url: str, root: Path, window: int | None = None) -> Settings:
    values: dict[str, Any] = dict(
        window=window,
        model=f"openai:{url}",
        data_dir=root / "data",
        workspace=root,
        fsync=False,
        price_sheet="local",
        max_reply_tokens=16,
    )
    if "fold" in Settings.model_fields:  # the grouped settings
        values.update(fold={"summarizer": "model"}, tools={"protocol": "native"})  # a base model's noise is not actions
    else:
        values.update(summarizer="model", tool_protocol="native")
    return Settings(**values)


def yesterday(settings: Settings, turns: int) -> None:
    async def day() -> None:
        async with open_agent(settings, async_writer=False, new=True, say=None) as agent:
            for i in range(turns):
                result = await agent.turn(FACT.format(i=i, port=8000 + i), None)
                assert result.error is None, result.error
        slot = agent.closing.slot if agent.closing is not None else None  # saved on quit, by the close
        print("  yesterday:", slot.line if slot is not None else None)

    asyncio.run(day())


def other_client(url: str) -> None:
    body = {"messages": [{"role": "user", "content": "Another client, another prompt."}], "max_tokens": 1, "id_slot": 0}
    httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300).raise_for_status()


def morning(settings: Settings, case: str) -> dict[str, Any]:
    real = time.time
    later = lambda: real() + PAUSE  # noqa: E731
    build_mod.time.time = later  # type: ignore[attr-defined]
    try:
        agent = build_agent(settings, {"continue_": True}, async_writer=False)
    finally:
        build_mod.time.time = real  # type: ignore[attr-defined]
    agent.session.clock = later
    folds_before = len(agent.session.folds)
    before = len(agent.session.usage)
    started = time.perf_counter()
    try:
        import tailrent_tui.agent.kv_slots as slots_mod

        slots_mod.time.time = later  # type: ignore[attr-defined]
        result = asyncio.run(agent.turn("Good morning. Which port does service 3 use?", None))
        slots_mod.time.time = real  # type: ignore[attr-defined]
        assert result.error is None, result.error
        wall = time.perf_counter() - started
        new = agent.session.usage[before:]
        first = new[0]
        return {
            "case": case,
            "resume": next((t for t, _ in agent.link.resume_lines if t.startswith("resume:")), None),
            "folds": len(agent.session.folds) - folds_before,
            "first_request": {
                "purpose": first.purpose,
                "evaluated": first.evaluated_tokens,
                "prompt_ms": first.prompt_ms,
                "context": first.context_tokens,
            },
            "requests_until_reply": len(new),
            "evaluated_until_reply": sum(u.evaluated_tokens or 0 for u in new),
            "seconds_until_reply": round(wall, 1),
        }
    finally:
        asyncio.run(agent.aclose())  # the close `open_agent` runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--window", type=int, help="budget this window (default: the server's)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = settings_for(a.url, root, a.window)
        yesterday(settings, a.turns)
        saved = root / "saved"
        shutil.copytree(root / "data", saved)
        rows = [morning(settings, "kept")]
        for case in ("no slot", "restored"):
            shutil.rmtree(root / "data")
            shutil.copytree(saved, root / "data")
            other_client(a.url)
            if case == "no slot":
                for meta in (root / "data").glob("sessions/*/meta.json"):
                    data = json.loads(meta.read_text())
                    data["slots"] = []
                    meta.write_text(json.dumps(data))
            rows.append(morning(settings, case))
        for row in rows:
            print(json.dumps(row))


if __name__ == "__main__":
    main()
