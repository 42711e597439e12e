"""What the UI uses of the agent: a small Protocol, so the app never probes it.

`agent.loop.Agent` satisfies it (its rooms, each seen through the few calls the app makes
of it); a test may hand the app anything that does.
Everything the app does to the session goes through these calls: the app
renders the session's events, it never changes the session itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tailrent_tui.agent.events import SummaryProgress, TurnCallbacks, TurnResult
    from tailrent_tui.agent.fold_requests import PreparedFold
    from tailrent_tui.agent.kv_slots import SlotKeeper
    from tailrent_tui.agent.mcp.hub import McpHub
    from tailrent_tui.agent.placement import PlacementKeeper
    from tailrent_tui.core.keepwarm import KeepWarm
    from tailrent_tui.core.messages import (
        Folded,
        FoldRecord,
        FoldSkipped,
        Message,
        Note,
        Pinned,
        Spilled,
        StatementChanged,
        Unfolded,
        Unpinned,
        WatchAdded,
    )
    from tailrent_tui.core.probe import ProbeReport
    from tailrent_tui.core.rent import RentModel
    from tailrent_tui.core.session import Session
    from tailrent_tui.core.summarize import Review, Verdict
    from tailrent_tui.store.journal import Writer


class ModelName(Protocol):
    @property
    def name(self) -> str: ...


class ModelStart(Protocol):
    """The model's start (agent/startup.py `ModelLink`): after the app's first frame."""

    @property
    def preload_seconds(self) -> float | None:
        """How long the model took to load before the first request, when it was loaded."""

    @property
    def resume_lines(self) -> list[tuple[str, str]]:
        """The resume's price and the slot restored, as (text, level)."""

    def will_preload(self) -> bool: ...
    async def start(self) -> None: ...


class LadderCalls(Protocol):
    """The ladder by hand (agent/ladder_driver.py `LadderDriver`): pins, statements, spills, folds."""

    # set by the session screen while it is mounted
    on_review: Callable[[Review], Awaitable[Verdict]] | None

    def pin(self, message_id: str) -> Pinned | None: ...
    def unpin(self, message_id: str) -> Unpinned | None: ...
    def accept_statement(self, statement_id: str) -> StatementChanged | None: ...
    def supersede_statement(self, statement_id: str) -> StatementChanged | None: ...
    def edit_statement(self, statement_id: str, text: str) -> StatementChanged | None: ...
    def pin_statement(self, statement_id: str, pinned: bool = True) -> StatementChanged | None: ...
    def spill(self, message_id: str) -> Spilled: ...
    def watch(self, word: str) -> WatchAdded | None: ...
    async def fold(self, span_ids: list[str] | None = None, *, trigger: str = "manual") -> Folded | FoldSkipped | None: ...
    def unfold(self, fold_no: int) -> Unfolded: ...


class FoldRequestCalls(Protocol):
    """Fold summaries and folds prepared ahead (agent/fold_requests.py `FoldRequests`)."""

    # set by the session screen while it is mounted
    on_summary: Callable[[SummaryProgress], None] | None
    on_prepared: Callable[[PreparedFold | None], None] | None

    async def prepare_fold(self) -> PreparedFold | None: ...


class FoldCostCalls(Protocol):
    """What a fold costs the next request (agent/fold_costs.py `FoldCosts`)."""

    def unfold_cost(self, fold_no: int) -> tuple[int, float | None, bool]: ...
    def reread_after(self, record: FoldRecord) -> tuple[int, float | None]: ...


class StoreReads(Protocol):
    """What the session keeps outside its context (agent/stores.py `SessionStores`)."""

    async def fold_originals_async(self, fold_no: int) -> list[Message]: ...
    async def spill_text(self, spill_id: str) -> str: ...
    def recall(self, question: str, expect: list[str]) -> tuple[ProbeReport, list[str]]: ...
    def export(self, fmt: str = "md", path: Path | None = None) -> Path: ...


class UserInput(Protocol):
    """What the user sends beside a message (agent/tool_runner.py `ToolRunner`): `!cmd`, pastes, `@file`."""

    async def shell(self, command: str) -> Message: ...
    async def attach_paste(self, label: str, text: str) -> Message: ...
    async def attach_file(self, path: str) -> Message: ...


class Pings(Protocol):
    """The keep-warm ping (agent/turn.py `TurnLoop`)."""

    async def ping(self, now: float | None = None) -> bool: ...


class Meter(Protocol):
    """The rent and usage meter (agent/meter.py `UsageMeter`)."""

    @property
    def keep_warm(self) -> KeepWarm | None: ...


class SessionAgent(Protocol):
    """The agent as the app sees it: the session, the model's name, its rooms, one turn.

    Read-only to the UI: properties, so an agent may keep them as attributes or compute them."""

    @property
    def session(self) -> Session: ...
    @property
    def model(self) -> ModelName: ...
    @property
    def workspace(self) -> Path: ...
    @property
    def journal(self) -> Writer | None:
        """The journal writer (sync or async), None for a session kept in memory."""

    @property
    def rent(self) -> RentModel | None:
        """The rent model (None in the demo)."""

    @property
    def slots(self) -> SlotKeeper | None:
        """The KV slot keeper (llama.cpp), None when there is none."""

    @property
    def placement(self) -> PlacementKeeper | None:
        """Where folds put their summary, and why (agent/placement.py), None when nothing detects it."""

    @property
    def notice(self) -> str | None:
        """Said in the notice bar at start (the mock model, a server that did not answer)."""

    @property
    def startup_notes(self) -> list[Note]:
        """Notes written while the session was built, before the app listened to it."""

    @property
    def sub_tokens(self) -> int:
        """Tokens spent by delegated sub-sessions."""

    @property
    def mcp(self) -> McpHub | None:
        """The session's MCP servers (agent/mcp `McpHub`), None when none is configured."""

    @property
    def link(self) -> ModelStart: ...
    @property
    def ladder(self) -> LadderCalls: ...
    @property
    def fold_requests(self) -> FoldRequestCalls: ...
    @property
    def fold_costs(self) -> FoldCostCalls: ...
    @property
    def stores(self) -> StoreReads: ...
    @property
    def tools(self) -> UserInput: ...
    @property
    def turns(self) -> Pings: ...
    @property
    def meter(self) -> Meter: ...

    async def turn(self, text: str | None, cb: TurnCallbacks | None = None) -> TurnResult: ...
    async def switch_model(self, spec: str) -> str: ...
