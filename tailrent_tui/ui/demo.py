"""The article's scenario, played live in the app at a readable pace.

The trace (`scenarios.article.article_trace`) goes through a real session
under the `naive` policy with the harness's budget (a 900-token tail, tool
results over 120 tokens spilled, the oldest 6 unpinned messages folded into a
summary at the front): the Tail panel grows and saws, spills appear, folds
land on the timeline, and the decision's details ("Redis", "15 minute",
"rotate", "mobile") are lost fold by fold, shown in the error color. With
`pinned`, the decision is pinned as the user would, and survives.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.binding import Binding

from tailrent_tui.core.guard import find_expected
from tailrent_tui.core.policies import PolicySettings
from tailrent_tui.core.rungs.fold import MemoryFoldArchive
from tailrent_tui.core.rungs.spill import MemorySpillStore
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import LossySummarizer
from tailrent_tui.core.tokens import get_counter
from tailrent_tui.scenarios.article import DECISION, WATCHLIST, article_trace
from tailrent_tui.ui.app import TailrentApp
from tailrent_tui.ui.screens.session import SessionScreen

if TYPE_CHECKING:
    from tailrent_tui.agent.loop import Agent
    from tailrent_tui.settings import Settings

# The harness's budget and spill threshold, in chars/4 tokens.
MAX_TAIL = 900
SPILL_THRESHOLD = 120
# Seconds each kind of line stays on screen at speed 1.
PACE = {"user": 0.5, "assistant": 0.35, "tool": 0.6}


def demo_session(clock: Any = None) -> tuple[Session, list[dict[str, Any]], PolicySettings]:
    """A fresh session for the article's trace, and the naive policy's settings for it."""
    records = article_trace()
    header = records[0]
    kwargs: dict[str, Any] = {"counter": get_counter("chars4"), "system": header["system"], "window": header["window"]}
    if clock is not None:
        kwargs["clock"] = clock
    session = Session(**kwargs)
    trigger = (MAX_TAIL + session.head_tokens) / session.window
    policy_settings = PolicySettings(
        window=session.window, fold_trigger=trigger, spill_threshold=SPILL_THRESHOLD, naive_batch=6, keep_recent=0
    )
    return session, records[1:], policy_settings


class DemoApp(TailrentApp):
    """TailrentApp that feeds the article's trace into its session; space (in an empty input) pauses.

    The input has the focus, as in the app, so typing `/inspect 1` types it. The
    demo's keys are priority bindings that act only while the input is empty:
    once something is typed, space and +/- are text (and in navigation, space marks a message).
    """

    BINDINGS = [
        Binding(
            "space", "toggle_pause", "Pause", id="demo.pause", tooltip="Pause or resume the demo (input empty)", priority=True
        ),
        Binding(
            "plus,equals_sign", "speed(2.0)", "Faster", id="demo.faster", tooltip="Double the pace (input empty)", priority=True
        ),
        Binding("minus", "speed(0.5)", "Slower", id="demo.slower", tooltip="Halve the pace (input empty)", priority=True),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("toggle_pause", "speed"):
            if len(self.screen_stack) > 1:
                return False
            return self.mode == "input" and not self.prompt.text
        return super().check_action(action, parameters)

    def __init__(
        self,
        agent: Agent,
        settings: Settings,
        *,
        records: list[dict[str, Any]],
        pinned: bool = False,
        speed: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(agent, settings, **kwargs)
        # the demo feeds the trace through the agent's own ladder (more than the app's SessionAgent offers)
        self.feeder = agent
        self.records = records
        self.pinned = pinned
        self.speed = speed
        self.played = 0
        self.finished = asyncio.Event()
        self._unpaused = asyncio.Event()
        self._unpaused.set()

    def on_session_screen_ready(self, event: SessionScreen.Ready) -> None:
        # (TailrentApp's own handler runs after this one: Textual calls each class's)
        self.prompt.keys_when_empty = frozenset({"space", "plus", "equals_sign", "minus"})
        for word in WATCHLIST:
            self.session.add_watch(word)
        self.run_worker(self._play(), group="demo", name="demo")
        state = "pinned" if self.pinned else "not pinned"
        self.notice_bar.show(
            f"demo: the article's run, decision {state} · space pauses (input empty) · +/- change the pace"
            " · watch the Folds panel"
        )

    async def _play(self) -> None:
        for record in self.records:
            await self._unpaused.wait()
            if "probe" in record:
                self._probe(record["probe"], record["expect"])
                continue
            role = record["role"]
            if role == "tool":
                await self.feeder.ladder.admit_tool_text(record["tool"], record["content"])
            else:
                pin = self.pinned and record["content"] == DECISION
                await self.feeder.ladder.add_message(role, record["content"], pinned=pin, autopin=False)
            self.played += 1
            await asyncio.sleep(PACE.get(role, 0.4) / self.speed)
        self.finished.set()

    def _probe(self, question: str, expect: list[str]) -> None:
        found = find_expected(expect, self.session.visible_text())
        kept = [w for w, ok in found.items() if ok]
        lost = [w for w, ok in found.items() if not ok]
        text = f"probe: {question} → {len(kept)}/{len(expect)} still in context"
        if lost:
            text += f"; lost: {', '.join(lost)}"
        self.session.note(text, "warning" if lost else "info")
        self.notice_bar.show(text, "error" if lost else "warning")

    def action_toggle_pause(self) -> None:
        if self._unpaused.is_set():
            self._unpaused.clear()
            self.notify("demo paused: space resumes")
        else:
            self._unpaused.set()

    def action_speed(self, factor: float) -> None:
        self.speed = min(64.0, max(0.125, self.speed * factor))
        self.notify(f"pace x{self.speed:g}")


@asynccontextmanager
async def open_demo(*, pinned: bool, speed: float, clock: Any = None, workspace: Path | None = None) -> AsyncIterator[DemoApp]:
    """The demo app around a real Agent (mock model, memory stores), opened and closed by `open_agent`."""
    from tailrent_tui.agent.lifecycle import InMemory, open_agent
    from tailrent_tui.settings import FoldSettings, Settings, ToolSettings

    session, records, policy_settings = demo_session(clock)
    settings = Settings(
        model="mock",
        policy="naive",
        tokenizer="chars4",
        fold=FoldSettings(
            guard="report", trigger=policy_settings.fold_trigger, target=min(0.99, policy_settings.fold_trigger / 2)
        ),
        tools=ToolSettings(spill_threshold=SPILL_THRESHOLD),
    )
    memory = InMemory(
        session,
        workspace=workspace,
        spill_store=MemorySpillStore(),
        archive=MemoryFoldArchive(),
        summarizer=LossySummarizer(),
        policy_settings=policy_settings,
        # the article's run, the same in any folder: a workspace's AGENTS.md is not part of it
        instructions=False,
    )
    async with open_agent(settings, memory=memory) as agent:
        extra = {"clock": clock} if clock is not None else {}
        app = DemoApp(agent, settings, records=records, pinned=pinned, speed=speed, **extra)
        agent.on_signal = lambda name: app.exit()
        yield app
