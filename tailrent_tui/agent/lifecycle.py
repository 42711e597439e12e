"""A session's lifetime, in one place: `async with open_agent(settings, flags) as agent:`.

Opening (`build.build_agent`): the session directory is found or made, its lock taken,
its journal replayed and a writer attached, the model opened (the embedded engine and
the slot restore come with `agent.link.start()`: the app calls it after its first frame,
`ask` asks `open_agent` for it). A session kept in memory (the demo, the bench) is
opened with `memory=InMemory(...)`: no directory, no lock, no journal.

Closing, on every way out of the block (it returns, raises, is cancelled by ctrl+c,
or SIGTERM / SIGHUP arrives): `Agent.aclose` (agent/closing.py: the MCP servers, the
KV slot saved, the journal flushed and closed, meta.json written, the lock released,
a rescue file said, the model's client closed, the embedded engine stopped within a
bound). What the close did is `agent.closing`; each of its lines is handed to `say`.
SIGTERM and SIGHUP close the session as quitting does: `agent.on_signal` (the app's
exit) is called, else the block is cancelled; after the close `Signalled` is raised,
for the caller to exit with 128 + the signal's number.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailrent_tui.agent.build import build_agent
from tailrent_tui.agent.closing import CloseLine
from tailrent_tui.agent.loop import Agent
from tailrent_tui.core.policies import PolicySettings
from tailrent_tui.core.ports import FoldArchive, SpillStore
from tailrent_tui.core.rent import RentModel
from tailrent_tui.core.session import Session
from tailrent_tui.core.summarize import Summarizer
from tailrent_tui.models.base import ChatModel
from tailrent_tui.models.factory import open_model
from tailrent_tui.settings import Settings

#: the signals that close the session as quitting does
CLOSING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
#: after a signal, how long the block has to end by itself (the app's own exit) before it is cancelled
SIGNAL_GRACE_SECONDS = 5.0


class Signalled(Exception):
    """SIGTERM or SIGHUP closed the session; raised after the close."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"stopped by {self.name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass
class InMemory:
    """A session the caller made and keeps in memory (the demo, the bench): no directory, lock or journal.

    `model`: one the caller owns and closes (the bench's engine); None opens the settings' model here.
    """

    session: Session
    model: ChatModel | None = None
    summarizer: Summarizer | None = None
    policy_settings: PolicySettings | None = None
    spill_store: SpillStore | None = None
    archive: FoldArchive | None = None
    rent: RentModel | None = None
    workspace: Path | None = None
    instructions: bool = False


def say_on_stderr(line: CloseLine) -> None:
    """The app's way: one line on the terminal (which may be gone after SIGHUP)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"tailrent: {line.text}", file=sys.stderr, flush=True)


@asynccontextmanager
async def open_agent(
    settings: Settings,
    flags: Mapping[str, Any] | None = None,
    *,
    new: bool = False,
    told: set[str] | None = None,
    title: str | None = None,
    async_writer: bool = True,
    memory: InMemory | None = None,
    start: bool = False,
    reason: str = "quit",
    say: Callable[[CloseLine], None] | None = say_on_stderr,
) -> AsyncIterator[Agent]:
    """Open the session (see the module's doc), yield its Agent, close it on every exit path.

    `start`: start the model before the block (load it, restore the KV slot); `reason`: what
    the slot save says ("quit", "end of ask"). A BuildError (one line) is raised when it
    cannot open; `Signalled` after a close that SIGTERM or SIGHUP asked for.
    """
    if memory is None:
        agent = build_agent(settings, dict(flags or {}), async_writer=async_writer, new=new, title=title, told=told)
    else:
        model = memory.model if memory.model is not None else open_model(settings.model, None)[0]
        agent = Agent(
            session=memory.session,
            model=model,
            settings=settings,
            workspace=memory.workspace or Path.cwd(),
            spill_store=memory.spill_store,
            archive=memory.archive,
            summarizer=memory.summarizer,
            rent=memory.rent,
            policy_settings=memory.policy_settings,
            instructions=memory.instructions,
        )
        agent.owns_model = memory.model is None
    guard = _SignalGuard(agent)
    guard.install()
    try:
        if start:
            await agent.link.start()
        yield agent
    except asyncio.CancelledError:
        if guard.signum is None:
            raise
        guard.uncancel()  # the guard's own cancel: the close below runs, then Signalled
    finally:
        guard.closing = True
        try:
            closing = await agent.aclose(guard.reason or reason)
        finally:
            guard.remove()
        closing.signal = guard.reason
        if say is not None:
            for line in closing.lines:
                say(line)
    if guard.signum is not None:
        raise Signalled(guard.signum)


class _SignalGuard:
    """SIGTERM and SIGHUP while the block runs: the agent's `on_signal`, else a cancel; ignored while closing."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.signum: int | None = None
        self.closing = False
        self._cancelled = False
        self._installed: list[int] = []

    @property
    def reason(self) -> str | None:
        return signal.Signals(self.signum).name if self.signum is not None else None

    def install(self) -> None:
        for sig in CLOSING_SIGNALS:
            try:
                self.loop.add_signal_handler(sig, self._on_signal, int(sig))
            except (ValueError, RuntimeError, NotImplementedError):
                continue  # not the main thread (a test's own loop): nothing to route
            self._installed.append(int(sig))

    def remove(self) -> None:
        for sig in self._installed:
            with contextlib.suppress(ValueError, RuntimeError):
                self.loop.remove_signal_handler(sig)
        self._installed.clear()

    def _on_signal(self, signum: int) -> None:
        if self.closing:
            return  # the close is under way: it finishes
        first = self.signum is None
        self.signum = self.signum or signum
        hook = self.agent.on_signal
        if hook is not None and first:
            hook(signal.Signals(signum).name)
            self.loop.call_later(SIGNAL_GRACE_SECONDS, self._cancel)
        else:
            self._cancel()  # no hook, or a second signal: the block ends now

    def _cancel(self) -> None:
        if self.closing or self.task is None or self.task.done():
            return
        self._cancelled = True
        self.task.cancel()

    def uncancel(self) -> None:
        if self._cancelled and self.task is not None:
            self.task.uncancel()
