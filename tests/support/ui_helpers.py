"""Shared pieces of the UI tests: a real Agent on the mock model, a fixed clock, waiting on conditions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from tailrent_tui.agent.loop import Agent
from tailrent_tui.core.messages import Kind, new_spill_id
from tailrent_tui.core.rent import RentModel
from tailrent_tui.core.rungs.fold import MemoryFoldArchive
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.models.mock import MockModel
from tailrent_tui.settings import Settings
from tailrent_tui.ui.app import TailrentApp

NOW = 1_790_000_000.0  # a fixed instant, so ages and clocks on screen never change


class FixedClock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_agent(
    workspace: Path,
    *,
    script: list[dict[str, Any]] | None = None,
    delay: float = 0.0,
    settings: Settings | None = None,
    window: int = 8192,
    clock: Callable[[], float] | None = None,
    notice: str | None = None,
    spill_ids: Callable[[], str] = new_spill_id,
    rent: RentModel | None = None,
) -> Agent:
    session = Session(
        counter=get_counter("chars4"),
        system="You are a test agent.",
        window=window,
        clock=clock or FixedClock(),
        spill_ids=spill_ids,
        id="test-session",
    )
    settings = settings or Settings(tools={"spill_threshold": 200}, tokenizer="chars4")
    return Agent(
        session=session,
        model=MockModel(script, delay=delay, chunk_size=4),
        settings=settings,
        workspace=workspace,
        spill_store=MemorySpillStore(),
        archive=MemoryFoldArchive(),
        notice=notice,
        rent=rent,
    )


class GatedModel(MockModel):
    """A MockModel whose requests wait at `gate` until a test (or a benchmark) opens it: a slow server, held still."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = asyncio.Event()

    async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
        await self.gate.wait()
        async for chunk in super().stream(messages, **kwargs):
            yield chunk


def make_app(agent: Agent, **kwargs: Any) -> TailrentApp:
    return TailrentApp(agent, agent.settings, clock=kwargs.pop("clock", FixedClock()), **kwargs)


PAD = " We talked it over and it looked fine to everyone in the room."


def fill(session: Session, n: int, *, prefix: str = "m", tool_every: int = 0, big: int = 0, pad: int = 0) -> None:
    """Add n messages with stable ids (user/assistant alternating, a tool result every `tool_every`).

    `pad` adds that many sentences of chatter to each chat message, so that a fold
    of a few messages has something to shrink.
    """
    start = len(session)
    for i in range(start, start + n):
        if tool_every and i % tool_every == tool_every - 1:
            m = session.make_message("tool", f"output line {i}\n" + "x " * big, kind=Kind.tool_result, tool="grep")
        elif i % 2 == 0:
            m = session.make_message("user", f"Question {i}: what about the cache on port {8000 + i}?" + PAD * pad)
        else:
            m = session.make_message("assistant", f"Answer {i}: the cache uses **Redis** with a {i} minute TTL." + PAD * pad)
        m.id = f"{prefix}{i:05d}"
        session.add_message(m, autopin=False)


async def wait_until(pilot: Any, condition: Callable[[], bool], *, rounds: int = 400, what: str = "condition") -> None:
    """Let the app run until `condition()` holds; fail after a bounded number of rounds (never a sleep)."""
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause()
    raise AssertionError(f"timed out waiting for: {what}")


async def submit(pilot: Any, app: Any, text: str) -> None:
    """Type `text` into the input (as one value) and press enter."""
    from tailrent_tui.ui.widgets.input import PromptInput

    box = app.query_one(PromptInput)
    box.focus()
    box.value = text
    await pilot.press("enter")
    await pilot.pause()


async def approve_preview(pilot: Any, app: Any) -> None:
    """A fold by hand opens its preview ([fold] preview = "manual", the default): enter applies it."""
    from tailrent_tui.ui.screens.fold_preview import FoldPreview

    await wait_until(pilot, lambda: isinstance(app.screen, FoldPreview), what="the fold preview")
    await pilot.press("enter")
    await wait_until(pilot, lambda: not isinstance(app.screen, FoldPreview), what="the preview closed")
