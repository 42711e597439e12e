"""What the UI uses of the agent: a small Protocol, so the app never probes it.

`agent.loop.Agent` satisfies it; a test may hand the app anything that does.
Everything the app does to the session goes through these calls: the app
renders the session's events, it never changes the session itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tailrent_tui.agent.events import SummaryProgress, TurnCallbacks, TurnResult
    from tailrent_tui.core.keepwarm import KeepWarm
    from tailrent_tui.core.messages import (
        Folded,
        FoldRecord,
        FoldSkipped,
        Message,
        Note,
        Pinned,
        Spilled,
        Unfolded,
        Unpinned,
        WatchAdded,
    )
    from tailrent_tui.core.ports import SpillStore
    from tailrent_tui.core.probe import ProbeReport
    from tailrent_tui.core.rent import RentModel
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.summarize import Review, Verdict


class ModelName(Protocol):
    name: str


class SessionAgent(Protocol):
    """The agent as the app sees it: the session, the model's name, the ladder's calls, one turn."""

    session: Session
    model: ModelName
    workspace: Path
    spill_store: SpillStore
    #: the journal writer (sync or async), None for a session kept in memory
    journal: Any
    #: the rent model (None in the demo) and its keep-warm rule
    rent: RentModel | None
    keep_warm: KeepWarm | None
    #: the KV slot keeper (llama.cpp), None when there is none
    slots: Any
    #: said in the notice bar at start (the mock model, a server that did not answer)
    notice: str | None
    #: notes written while the session was built, before the app listened to it
    startup_notes: list[Note]
    #: the resume's price and the slot restored, as (text, level)
    resume_lines: list[tuple[str, str]]
    #: tokens spent by delegated sub-sessions
    sub_tokens: int
    preload_seconds: float | None
    on_summary: Callable[[SummaryProgress], None] | None
    on_review: Callable[[Review], Awaitable[Verdict]] | None

    def will_preload(self) -> bool: ...
    async def start(self) -> None: ...
    async def ping(self, now: float | None = None) -> bool: ...
    async def turn(self, text: str | None, cb: TurnCallbacks | None = None) -> TurnResult: ...
    async def attach_paste(self, label: str, text: str) -> Message: ...
    async def attach_file(self, path: str) -> Message: ...
    async def shell(self, command: str) -> Message: ...
    def pin(self, message_id: str) -> Pinned | None: ...
    def unpin(self, message_id: str) -> Unpinned | None: ...
    def spill(self, message_id: str) -> Spilled: ...
    def watch(self, word: str) -> WatchAdded | None: ...
    async def fold(self, span_ids: list[str] | None = None, *, trigger: str = "manual") -> Folded | FoldSkipped | None: ...
    def unfold(self, fold_no: int) -> Unfolded: ...
    def fold_originals(self, fold_no: int) -> list[Message]: ...
    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]: ...
    def spill_text(self, spill_id: str) -> str: ...
    def recall(self, question: str, expect: list[str]) -> tuple[ProbeReport, list[str]]: ...
    async def switch_model(self, spec: str) -> str: ...
    def export(self, fmt: str = "md", path: Path | None = None) -> Path: ...

